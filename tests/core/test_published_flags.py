"""A published plan given only its printed flags lands near its published time (validate/printed.py:
the row's printed flags through the defaults every verb applies). The mean error must stay within 2
points of the validation harness's, which resolves every `auto` cell by search (validate/harness.py)."""

from __future__ import annotations

import statistics

from distscope.validate.harness import predict_row
from distscope.validate.printed import printed_error_pct
from distscope.validate.rows import parse_row, read_rows

TOLERANCE_POINTS = 2.0


def test_published_plans_from_their_printed_flags(validation_dir) -> None:  # type: ignore[no-untyped-def]
    rows = [parse_row(raw, line) for line, raw in read_rows(validation_dir / "published_runs.csv")]
    printed = [abs(printed_error_pct(r)) for r in rows]
    harness = [abs(predict_row(r).error_pct or 0.0) for r in rows]
    assert len(printed) == 51
    assert statistics.mean(printed) <= statistics.mean(harness) + TOLERANCE_POINTS, (
        statistics.mean(printed), statistics.mean(harness))
