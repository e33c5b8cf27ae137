"""One measured (op, size, dtype, nranks) point, shared by the sweep, nccl-tests ingestion and calibration.

JSON file: {"results": [{"op", "bytes", "dtype", "nranks", "time_s", "algbw_GBps", "busbw_GBps",
"time_min_s", "time_max_s", "iters", "level", "in_place", "backend", "source", "device"}, ...]}
where time_s is the
median over iterations and bytes follows the nccl-tests convention (see `distscope.comm.collective`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.userfile import read_json, read_text


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectiveResult:
    """A measured collective: median/min/max time over `iters` iterations, nccl-tests byte convention."""

    op: Collective
    bytes: int
    dtype: str
    nranks: int
    time_s: float
    time_min_s: float
    time_max_s: float
    iters: int
    level: str = "default"
    in_place: bool = False
    backend: str = ""
    source: str = ""
    device: str = ""

    def __post_init__(self) -> None:
        if self.bytes < 0:
            raise DistscopeError(f"bytes={self.bytes} must be >= 0")
        if self.nranks < 1:
            raise DistscopeError(f"nranks={self.nranks} must be >= 1")
        if not 0 < self.time_min_s <= self.time_s <= self.time_max_s:
            raise DistscopeError(
                f"times must satisfy 0 < min <= median <= max, got "
                f"{self.time_min_s}, {self.time_s}, {self.time_max_s} "
                f"for op={self.op.value} bytes={self.bytes}"
            )

    @property
    def algbw_GBps(self) -> float:
        return self.op.bandwidths_GBps(self.bytes, self.time_s, self.nranks)[0]

    @property
    def busbw_GBps(self) -> float:
        return self.op.bandwidths_GBps(self.bytes, self.time_s, self.nranks)[1]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["op"] = self.op.value
        d["algbw_GBps"] = self.algbw_GBps
        d["busbw_GBps"] = self.busbw_GBps
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CollectiveResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in fields}
        missing = {"op", "bytes", "dtype", "nranks", "time_s"} - kw.keys()
        if missing:
            raise DistscopeError(f"result row is missing {sorted(missing)}: {d}")
        kw["op"] = Collective.parse(str(kw["op"]))
        kw.setdefault("time_min_s", kw["time_s"])
        kw.setdefault("time_max_s", kw["time_s"])
        kw.setdefault("iters", 1)
        kw["bytes"], kw["nranks"], kw["iters"] = int(kw["bytes"]), int(kw["nranks"]), int(kw["iters"])
        if isinstance(kw.get("in_place"), str):  # from CSV
            kw["in_place"] = kw["in_place"].strip().lower() in ("1", "true", "yes")
        for k in ("time_s", "time_min_s", "time_max_s"):
            kw[k] = float(kw[k])
        return cls(**kw)


_CSV_FIELDS = [
    "op",
    "bytes",
    "dtype",
    "nranks",
    "time_s",
    "algbw_GBps",
    "busbw_GBps",
    "time_min_s",
    "time_max_s",
    "iters",
    "level",
    "in_place",
    "backend",
    "source",
    "device",
]


def save_results(results: Sequence[CollectiveResult], path: Path) -> None:
    """Write .json ({"results": [...]}) or .csv, chosen by the suffix."""
    rows = [r.to_dict() for r in results]
    if path.suffix == ".json":
        path.write_text(json.dumps({"results": rows}, indent=1) + "\n")
    elif path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=_CSV_FIELDS)
            w.writeheader()
            w.writerows(rows)
    else:
        raise DistscopeError(f"out={str(path)!r} must end in .json or .csv")


def load_results(path: Path) -> list[CollectiveResult]:
    """Read a file written by `save_results` (.json or .csv)."""
    if path.suffix == ".json":
        data = read_json(path, "results file")
        if not isinstance(data.get("results"), list):
            raise DistscopeError(f"results file={str(path)!r} has no 'results' list")
        return [CollectiveResult.from_dict(r) for r in data["results"]]
    if path.suffix == ".csv":
        text = read_text(path, "results file")
        return [CollectiveResult.from_dict(dict(r)) for r in csv.DictReader(io.StringIO(text, newline=""))]
    raise DistscopeError(f"results file={str(path)!r} must end in .json or .csv")
