"""Published DLRM training runs (data/evidence/dlrm_runs.csv, described in data/evidence/README.md) priced
by model/embedding_cost.py under the row's sharding: a file where the source prints its placement,
HugeCTR's hier_auto plan with the run's config arguments where the run used it, else distscope's planner.
A row's `kernels` file (a profile measured on that GPU model, data/device/) puts its measured GEMM and
element-wise tables on the device, as `--profile` does; rows without one use the analytic kernel model.
Nothing is fitted to these rows: every error is out of sample."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.measure.kernel_profile import kernel_device_warning
from distscope.measure.profile import load_profile
from distscope.model.dlrm_cli import shardings_for
from distscope.model.embedding_cost import estimate_dlrm
from distscope.system.calibrated import apply_profile
from distscope.system.device import get_device
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster
from distscope.userfile import read_csv
from distscope.workload.embedding import DlrmSpec, load_dlrm


@dataclasses.dataclass(frozen=True)
class DlrmRowResult:
    run_id: str
    source: str
    model: str
    gpus: int
    sharding: str
    measured_ms: float
    predicted_ms: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_ms / self.measured_ms - 1.0)


def row_cluster(row: Mapping[Any, Any], root: Path, measured_kernels: bool = True) -> Cluster:
    """The row's preset at its GPU count; `device` (when given) replaces the preset's GPU, e.g. the 40 GB
    A100 of 2020's DGX A100 on the dgx-a100 preset's NVSwitch nodes and InfiniBand; `kernels` (a profile
    file relative to `root`) adds its measured kernel tables unless `measured_kernels` is off."""
    c = get_cluster(row["cluster"], int(row["gpus"]))
    dev = (row.get("device") or "").strip()
    c = dataclasses.replace(c, device=get_device(dev)) if dev else c
    kernels = (row.get("kernels") or "").strip()
    if not (kernels and measured_kernels):
        return c
    prof = load_profile(root / kernels)
    if prof.kernels is None or (warn := kernel_device_warning(prof.kernels, c.device.name)):
        raise DistscopeError(f"kernels={kernels!r}: {warn or 'no kernel tables in it'} (row {row.get('id', '?')})")
    return apply_profile(c, prof)


def _row_spec(row: Mapping[Any, Any], root: Path) -> DlrmSpec:
    """The row's model: a tables file relative to `root` (the repository), or a preset (dlrm:mlperf-dcnv2)."""
    name = row["model"]
    return load_dlrm(name.replace("dlrm:", f"dlrm:{root}/", 1) if name.endswith((".yaml", ".yml")) else name)


def predict_file(path: str | Path, root: Path, measured_kernels: bool = True) -> list[DlrmRowResult]:
    """Every row of `path`; tables, sharding and kernel files are named relative to `root` (the
    repository). Rows that share tables, cluster, batch and sharding are priced once. `measured_kernels`
    off: every row on the analytic kernel model (what `estimate` gives without `--profile`)."""
    _, rows = read_csv(path, "DLRM runs CSV")
    priced: dict[tuple[str, ...], float] = {}
    out = []
    for _, r in rows:
        key = (r["model"], r["cluster"], r.get("device") or "", r.get("kernels") or "", r["gpus"], r["global_batch"],
               r["sharding"])
        if key not in priced:
            spec = _row_spec(r, root)
            c = row_cluster(r, root, measured_kernels)
            gb = int(r["global_batch"])
            named = r["sharding"]
            sh, _ = shardings_for(spec, c, None if named == "planner" else
                                  str(root / named) if named.endswith((".yaml", ".yml")) else named, gb)
            priced[key] = estimate_dlrm(spec, c, sh, global_batch=gb).step_time_s * 1e3
        out.append(DlrmRowResult(run_id=r["id"], source=r["source"], model=r["model"], gpus=int(r["gpus"]),
                                 sharding=r["sharding"],
                                 measured_ms=float(r["measured_step_ms"]), predicted_ms=priced[key]))
    return out


@dataclasses.dataclass(frozen=True)
class HybridBracket:
    """A row that ran HugeCTR's hybrid embedding, priced at both ends of what its config allows
    (model/hybrid_embedding.py): no frequent category (low) and as many as can clear the config's
    threshold (high), each with the infrequent lookups at the buffer's mean, b x tables."""

    run_id: str
    measured_ms: float
    low_ms: float
    high_ms: float
    frequent_bound: int
    threshold: float

    @property
    def inside(self) -> bool:
        return self.low_ms <= self.measured_ms <= self.high_ms


_HYBRID_KEYS = ("file", "rows", "nodes", "efficiency_ratio", "a2a_bw", "ar_bw", "iterations")


def hybrid_brackets(runs: str | Path, configs: str | Path, root: Path) -> list[HybridBracket]:
    """Every row of `runs` that `configs` (data/evidence/dlrm/hugectr_hybrid_configs.yaml) names, bracketed."""
    from distscope.model.hybrid_embedding import HybridEmbedding, frequent_bound, threshold
    from distscope.userfile import int_field, mappings, num_field, read_yaml

    _, rows = read_csv(runs, "DLRM runs CSV")
    by_id = {r["id"]: r for _, r in rows}
    raw = read_yaml(configs, "hybrid embedding configs")
    out = []
    for where, c in mappings(raw.get("configs") if isinstance(raw, dict) else None, "configs", _HYBRID_KEYS,
                             str(configs)):
        iterations = int_field(c, "iterations", where)
        thr = threshold(iterations, int_field(c, "nodes", where),
                        num_field(c, "a2a_bw", where), num_field(c, "ar_bw", where),
                        num_field(c, "efficiency_ratio", where))
        for run_id in c.get("rows") or []:
            if run_id not in by_id:
                raise DistscopeError(f"{where}: row {run_id!r} is not in {runs}")
            r = by_id[run_id]
            spec = _row_spec(r, root)
            cluster = row_cluster(r, root)
            gb, n = int(r["global_batch"]), int(r["gpus"])
            per_sample = sum(t.pooling for t in spec.tables)
            infrequent = gb * per_sample / n  # max_num_infrequent_samples' mean: b x tables
            bound = frequent_bound(gb, per_sample, 0.0, thr, iterations, float("inf"))
            low, high = (estimate_dlrm(spec, cluster, HybridEmbedding(frequent=f, infrequent=infrequent),
                                       global_batch=gb).step_time_s * 1e3 for f in (0, bound))
            out.append(HybridBracket(run_id=run_id, measured_ms=float(r["measured_step_ms"]), low_ms=low,
                                     high_ms=high, frequent_bound=bound, threshold=thr))
    return out
