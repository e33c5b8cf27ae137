"""Rich tables for measure's outputs (results, fits, logged-call summaries, straggler reports)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from distscope.measure.profile import SystemProfile
from distscope.measure.result import CollectiveResult
from distscope.measure.straggler import StragglerReport
from distscope.measure.summary import SummaryRow


def results_table(results: Sequence[CollectiveResult], title: str = "collectives") -> Table:
    t = Table(title=title)
    for col in (
        "op",
        "dtype",
        "nranks",
        "bytes",
        "time_us (median)",
        "min_us",
        "max_us",
        "algbw GB/s",
        "busbw GB/s",
    ):
        t.add_column(col, justify="right" if col not in ("op", "dtype") else "left")
    for r in results:
        t.add_row(
            r.op.value + (" (in-place)" if r.in_place else ""),
            r.dtype,
            str(r.nranks),
            str(r.bytes),
            f"{r.time_s * 1e6:.1f}",
            f"{r.time_min_s * 1e6:.1f}",
            f"{r.time_max_s * 1e6:.1f}",
            f"{r.algbw_GBps:.4f}",
            f"{r.busbw_GBps:.4f}",
        )
    return t


def profile_table(profile: SystemProfile) -> Table:
    t = Table(title=f"alpha-beta fit: {profile.name}")
    for col in (
        "level",
        "op",
        "dtype",
        "nranks",
        "alpha_us",
        "beta_ns_per_byte",
        "busbw GB/s (1/beta)",
        "points",
        "bytes",
        "max_rel_err",
    ):
        t.add_column(col, justify="left" if col in ("level", "op") else "right")
    every = profile.by_dtype or {"": profile.levels}  # a multi-dtype sweep: each dtype's fits
    for lvls in every.values():
        for lvl, ops in lvls.items():
            for op, f in ops.items():
                t.add_row(lvl, op.value, f.dtype, str(f.nranks), f"{f.alpha_s * 1e6:.2f}",
                          f"{f.beta_s_per_byte * 1e9:.4f}", f"{f.busbw_GBps(op):.4f}", str(f.n_points),
                          f"{f.min_bytes}..{f.max_bytes}", f"{f.max_rel_err:.1%}")
    return t


def summary_table(rows: Sequence[SummaryRow], per_dim: dict[str, int]) -> Table:
    t = Table(title="logged communication (all ranks)")
    for col in ("dim", "op", "bytes/call", "calls", "ranks", "total bytes", "median duration_us"):
        t.add_column(col, justify="left" if col in ("dim", "op") else "right")
    last_dim = None
    for r in rows:
        if last_dim is not None and r.dim != last_dim:
            t.add_row(f"[bold]{last_dim} total", "", "", "", "", f"[bold]{per_dim[last_dim]}", "")
        last_dim = r.dim
        dur = "-" if r.median_duration_s is None else f"{r.median_duration_s * 1e6:.1f}"
        t.add_row(r.dim, r.op.value, str(r.bytes), str(r.calls), str(r.ranks), str(r.total_bytes), dur)
    if last_dim is not None:
        t.add_row(f"[bold]{last_dim} total", "", "", "", "", f"[bold]{per_dim[last_dim]}", "")
    return t


def straggler_table(report: StragglerReport) -> Table:
    t = Table(title="arrival skew per rank (issue time - earliest issue, per collective instance)")
    for col in ("rank", "instances", "median skew_ms", "mean skew_ms", "arrived last", "straggler"):
        t.add_column(col, justify="right")
    for r in report.ranks:
        t.add_row(
            str(r.rank),
            str(r.instances),
            f"{r.median_skew_s * 1e3:.3f}",
            f"{r.mean_skew_s * 1e3:.3f}",
            f"{r.last_fraction:.0%}",
            "YES" if r.rank in report.stragglers else "",
        )
    return t
