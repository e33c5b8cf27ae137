"""Published training runs of arbitrary torch modules (data/evidence/module_runs.csv, described in
data/evidence/README.md) predicted by model/module_estimate.py. Nothing is fitted to these rows: the
module path has no parameters of its own (the efficiency model's global parameters come from the
transformer runs), so every error here is out of sample."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.model.module_estimate import estimate_module
from distscope.userfile import read_csv
from distscope.validate.cluster_from_row import cluster_for
from distscope.workload.module_graph import load_factory, parse_inputs, trace_module

COLUMNS = ("run_id", "source", "model", "input", "gpu", "num_gpus", "gpus_per_node", "intra_node_GBps",
           "inter_node_GBps_per_gpu", "dp", "zero", "global_batch", "measured_step_time_s")


@dataclasses.dataclass(frozen=True)
class ModuleRowResult:
    run_id: str
    source: str
    measured_step_time_s: float
    predicted_step_time_s: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_step_time_s / self.measured_step_time_s - 1.0)


def predict_file(path: str | Path, root: Path) -> list[ModuleRowResult]:
    """Every row of `path`; module files are named relative to `root` (the repository)."""
    out = []
    _, rows = read_csv(path, "module runs CSV")
    for line, row in rows:
        missing = [c for c in COLUMNS if not (row.get(c) or "").strip()]
        if missing:
            raise DistscopeError(f"{path}:{line}: run_id={row.get('run_id')!r}: column {missing[0]} is empty")
        ref = row["model"]
        if ref.startswith("torch:"):
            ref = f"torch:{root / ref.removeprefix('torch:')}"
        factory, name = load_factory(ref)
        graph = trace_module(factory, parse_inputs(row["input"]), name)
        cluster = cluster_for(row["gpu"], int(row["num_gpus"]), int(row["gpus_per_node"]),
                              float(row["intra_node_GBps"]), float(row["inter_node_GBps_per_gpu"]))
        est = estimate_module(graph, cluster, dp=int(row["dp"]), zero=int(row["zero"]),
                              global_batch=int(row["global_batch"]))
        out.append(ModuleRowResult(run_id=row["run_id"], source=row["source"],
                                   measured_step_time_s=float(row["measured_step_time_s"]),
                                   predicted_step_time_s=est.step_time_s))
    return out


def summary(results: list[ModuleRowResult]) -> dict[str, Any]:
    errs = [abs(r.error_pct) for r in results]
    return {"rows": len(results), "mean_abs_error_pct": round(statistics.fmean(errs), 2),
            "max_abs_error_pct": round(max(errs), 2),
            "per_row": {r.run_id: round(r.error_pct, 1) for r in results}}
