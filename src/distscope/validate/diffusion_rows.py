"""Published diffusion inference runs (data/evidence/diffusion_runs.csv, described in data/evidence/README.md)
predicted by model/patch_parallel.py: one image's latency on one GPU, or its speed-up on N GPUs under
patch parallelism. Nothing is fitted to these rows (the path has no parameters of its own; the kernel
model's come from kernel benchmarks and the transformer runs), so every error here is out of sample.

A latency row prices the denoising loop (`steps` evaluations of the denoiser) plus one VAE decode when
the row names a decoder; a speed-up row with a decoder adds the decode to the latency at both ends, since
it is not split over the GPUs (DistriFusion's pipeline decodes the whole image on every rank), which
caps the speed-up as Amdahl's law does. The text encoders and the sampler's per-step arithmetic are not
priced (well under 1% of these runs' GPU work)."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from distscope.enums import parse_list
from distscope.errors import DistscopeError
from distscope.model.patch_parallel import PatchMode, PatchPlan, decode_s, sweep
from distscope.scenario import SystemFlags, build_cluster
from distscope.userfile import read_csv
from distscope.workload.module_graph import parse_inputs, trace_ref

COLUMNS = ("run_id", "source", "model", "input", "cluster", "gpus", "mode", "steps", "cfg_split", "cuda_graph",
           "metric", "measured")
METRICS = ("latency_s", "speedup")


@dataclasses.dataclass(frozen=True)
class DiffusionRowResult:
    run_id: str
    source: str
    metric: str
    measured: float
    predicted: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted / self.measured - 1.0)


def _ref(ref: str, root: Path) -> str:
    return f"torch:{root / ref.removeprefix('torch:')}" if ref.startswith("torch:") else ref


def _flag(row: dict[str | None, Any], col: str, where: str) -> bool:
    v = row[col].strip().lower()
    if v not in ("true", "false"):
        raise DistscopeError(f"{where}: {col}={row[col]!r} must be true or false")
    return v == "true"


def predict_row(row: dict[str | None, Any], root: Path, where: str) -> DiffusionRowResult:
    missing = [c for c in COLUMNS if not (row.get(c) or "").strip()]
    if missing:
        raise DistscopeError(f"{where}: column {missing[0]} is empty")
    if row["metric"] not in METRICS:
        raise DistscopeError(f"{where}: metric={row['metric']!r} is not one of {', '.join(METRICS)}")
    gpus = int(row["gpus"])
    cluster = build_cluster(SystemFlags(cluster=row["cluster"], gpus=max(gpus, 1)))
    plan = PatchPlan(gpus=gpus, mode=parse_list(PatchMode, row["mode"], "mode", "patch-parallel mode")[0],
                     steps=int(row["steps"]), cfg_split=_flag(row, "cfg_split", where),
                     cuda_graph=_flag(row, "cuda_graph", where))
    model = _ref(row["model"], root)
    vae = 0.0
    if (row.get("vae") or "").strip():
        graph = trace_ref(_ref(row["vae"], root), parse_inputs(row.get("vae_input")), inference=True)
        vae = decode_s(graph, cluster.device, plan.cuda_graph)
    run = sweep(lambda x: trace_ref(model, x, inference=True), parse_inputs(row["input"]), cluster, [plan],
                decode=vae)[0]
    predicted = run.speedup if row["metric"] == "speedup" else run.latency_s
    return DiffusionRowResult(run_id=row["run_id"], source=row["source"], metric=row["metric"],
                              measured=float(row["measured"]), predicted=predicted)


def predict_file(path: str | Path, root: Path) -> list[DiffusionRowResult]:
    """Every row of `path`; module files are named relative to `root` (the repository)."""
    _, rows = read_csv(path, "diffusion runs CSV")
    return [predict_row(row, root, f"{path}:{line}: run_id={row.get('run_id')!r}") for line, row in rows]


def summary(results: list[DiffusionRowResult]) -> dict[str, Any]:
    """Mean and max absolute error over all rows and per source (each source's rows are out of sample:
    nothing is fitted, so leaving a source out changes no prediction)."""
    errs = [abs(r.error_pct) for r in results]
    by_source: dict[str, list[float]] = {}
    for r in results:
        by_source.setdefault(r.source, []).append(abs(r.error_pct))
    return {"rows": len(results), "mean_abs_error_pct": round(statistics.fmean(errs), 2),
            "max_abs_error_pct": round(max(errs), 2),
            "per_source_mean_abs_error_pct": {s: round(statistics.fmean(e), 2) for s, e in by_source.items()},
            "per_row": {r.run_id: {"metric": r.metric, "measured": r.measured, "predicted": round(r.predicted, 4),
                                   "error_pct": round(r.error_pct, 1)} for r in results}}
