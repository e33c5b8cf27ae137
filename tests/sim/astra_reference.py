"""Reader for data/validation/astra_sim/astra_sim_reference.csv.

The CSV's ALL_TO_ALL rows are shifted by one column: the collective name was split at its underscore
into "ALL_TO","ALL" somewhere upstream, so `npus` reads "ALL" and `comm_size_bytes` reads the NPU count.
Every row's collective, NPU count and size are therefore taken from the case name
(`L_<backend>_<COLLECTIVE>_<npus>_<size>B_<topology>`), and the network, system and finish_ns from the
last four columns, which are in place in every row.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "data" / "validation" / "astra_sim"
_CASE = re.compile(r"^L_(?P<backend>unaware|aware)_(?P<coll>[A-Z_]+?)_(?P<npus>\d+)_(?P<size>\d+)B_(?P<topo>\w+)$")


@dataclass(frozen=True)
class Case:
    name: str
    backend: str
    collective: str
    npus: int
    size_bytes: int
    network: Path
    system: Path
    finish_ns: float


def read_cases(path: Path = REFERENCE_DIR / "astra_sim_reference.csv") -> list[Case]:
    rows = list(csv.reader(path.open()))
    header, body = rows[0], rows[1:]
    assert header[0] == "case" and header[-2] == "finish_ns"
    cases = []
    for row in body:
        m = _CASE.match(row[0])
        assert m, f"unparsable case name {row[0]!r}"
        backend = "congestion_" + m["backend"]
        assert row[1] == backend
        case = Case(
            name=row[0],
            backend=backend,
            collective=m["coll"],
            npus=int(m["npus"]),
            size_bytes=int(m["size"]),
            network=path.parent / row[-4],
            system=path.parent / row[-3],
            finish_ns=float(row[-2]),
        )
        if row[2] == case.collective:  # an unshifted row must agree with its name
            assert int(row[3]) == case.npus and int(row[4]) == case.size_bytes
        cases.append(case)
    return cases
