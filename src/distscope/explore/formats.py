"""Output formats of a sweep, chosen by the file's extension: .json, .csv, .parquet (pyarrow, the
optional extra `distscope[parquet]`). Each writes the tidy table (table.py) and reads back the rows a
resumed sweep needs (their `key` and raw result fields).

JSON: {"format", "complete", "sweep", "points": [row with the plan under "best_plan"], "pareto", "best"}.
CSV: the rows, one column per field (empty = none). Parquet: the rows with typed columns; the sweep,
fronts and picks in the file's key-value metadata. Floats are written in their shortest round-trip
form, so a value read back is the value computed.
"""

from __future__ import annotations

import csv
import enum
import io
import json
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.explore.point import OK, RESULT_FIELDS
from distscope.explore.table import COLUMNS, PLAN_COLUMNS

FORMAT = "distscope.explore/1"


class Format(enum.Enum):
    JSON = ".json"
    CSV = ".csv"
    PARQUET = ".parquet"

    @classmethod
    def of(cls, path: Path, field: str = "--out") -> Format:
        for f in cls:
            if path.name.lower().endswith(f.value):
                return f
        raise DistscopeError(f"{field}={str(path)!r}: the extension must be one of "
                             f"{', '.join(f.value for f in cls)}")


def json_doc(doc: dict[str, Any], sweep: dict[str, Any]) -> dict[str, Any]:
    points = []
    for r in doc["rows"]:
        p = {k: v for k, v in r.items() if k not in PLAN_COLUMNS}
        p["best_plan"] = {k: r[k] for k in PLAN_COLUMNS} if r["status"] == OK else None
        points.append(p)
    return {"format": FORMAT, "complete": True, "sweep": sweep, "points": points, "pareto": doc["pareto"],
            "best": doc["best"]}


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def encode(fmt: Format, doc: dict[str, Any], sweep: dict[str, Any]) -> bytes:
    if fmt is Format.JSON:
        return (json.dumps(json_doc(doc, sweep), indent=1, allow_nan=False) + "\n").encode()
    if fmt is Format.CSV:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in doc["rows"]:
            w.writerow([_csv_cell(r[c]) for c in COLUMNS])
        return buf.getvalue().encode()
    return _parquet_bytes(doc, sweep)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise DistscopeError("--out *.parquet needs pyarrow: pip install 'distscope[parquet]' "
                             "(or write .csv / .json)") from None
    return pyarrow


def _parquet_bytes(doc: dict[str, Any], sweep: dict[str, Any]) -> bytes:
    pa = _pyarrow()
    types = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    schema = pa.schema([pa.field(c, types[t]) for c, t in COLUMNS.items()],
                       metadata={"distscope": json.dumps({"format": FORMAT, "complete": True, "sweep": sweep,
                                                          "pareto": doc["pareto"], "best": doc["best"]})})
    table = pa.Table.from_pylist(doc["rows"], schema=schema)
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def _cell(t: type, v: Any) -> Any:
    if t is bool:
        return v if isinstance(v, bool) else str(v).lower() == "true"
    return v if isinstance(v, t) and not isinstance(v, bool) else t(v)


def raw_result(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, raw result) of a row read back from any format: an ok row has every field (a string may be
    empty), a failed one only its status, reason and plan count."""
    status = str(row["status"])
    out: dict[str, Any] = {}
    for k, t in RESULT_FIELDS.items():
        v = row.get(k)
        if k == "reason":
            out[k] = "" if v is None else str(v)
        elif status != OK and k not in ("status", "plans_evaluated"):
            out[k] = None
        elif v is None or (v == "" and t is not str):
            raise ValueError(f"field {k} is empty in a row with status {status}")
        else:
            out[k] = _cell(t, v)
    return str(row["key"]), out


def read_results(path: Path, fmt: Format) -> dict[str, dict[str, Any]]:
    """key -> raw result of every point of a complete sweep output (for resuming); a file that is not
    one is a one-line error."""
    what = f"--out={str(path)!r} exists but is not a complete distscope explore output"
    try:
        if fmt is Format.JSON:
            d = json.loads(path.read_text())
            if not isinstance(d, dict) or d.get("format") != FORMAT or d.get("complete") is not True:
                raise ValueError("no format tag")
            rows = []
            for p in d["points"]:
                r = {k: v for k, v in p.items() if k != "best_plan"}
                r.update(p.get("best_plan") or {})
                rows.append(r)
        elif fmt is Format.CSV:
            text = path.read_text()
            reader = csv.DictReader(io.StringIO(text))
            if reader.fieldnames is None or list(reader.fieldnames) != list(COLUMNS):
                raise ValueError("unexpected columns")
            rows = list(reader)
        else:
            pa = _pyarrow()
            t = pa.parquet.read_table(str(path))
            meta = json.loads((t.schema.metadata or {}).get(b"distscope", b"{}"))
            if meta.get("format") != FORMAT or meta.get("complete") is not True:
                raise ValueError("no format tag")
            rows = t.to_pylist()
        return dict(raw_result(r) for r in rows)
    except DistscopeError:
        raise
    except Exception as exc:
        raise DistscopeError(f"{what} ({type(exc).__name__}: {exc}); remove it, or pass --fresh to overwrite it") from None
