"""Aggregations of logged calls: per-step bytes per (op, dim), and the (op, dim, size) summary table."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable

from distscope.comm.collective import Collective
from distscope.measure.calls import CommCall


def bytes_per_op_dim(
    calls: Iterable[CommCall], *, rank: int, step: int
) -> dict[tuple[Collective, str], int]:
    """Bytes issued by `rank` during optimizer step `step`, per (op, dim); barriers excluded."""
    out: dict[tuple[Collective, str], int] = defaultdict(int)
    for c in calls:
        if c.rank == rank and c.step == step and c.op is not Collective.BARRIER:
            out[(c.op, c.dim)] += c.bytes
    return dict(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SummaryRow:
    op: Collective
    dim: str
    bytes: int  # message size of each call
    calls: int  # over all ranks
    ranks: int
    total_bytes: int  # over all ranks
    median_duration_s: float | None


def summarize(calls: Iterable[CommCall]) -> tuple[list[SummaryRow], dict[str, int]]:
    """Rows per (op, dim, size), and total bytes per dim (all ranks)."""
    groups: dict[tuple[Collective, str, int], list[CommCall]] = defaultdict(list)
    for c in calls:
        groups[(c.op, c.dim, c.bytes)].append(c)
    rows: list[SummaryRow] = []
    per_dim: dict[str, int] = defaultdict(int)
    for (op, dim, size), cs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0].value, kv[0][2])):
        durs = [c.duration_s for c in cs if c.duration_s is not None]
        rows.append(
            SummaryRow(
                op=op,
                dim=dim,
                bytes=size,
                calls=len(cs),
                ranks=len({c.rank for c in cs}),
                total_bytes=size * len(cs),
                median_duration_s=statistics.median(durs) if durs else None,
            )
        )
        per_dim[dim] += size * len(cs)
    return rows, dict(per_dim)
