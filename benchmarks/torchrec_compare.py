"""distscope's embedding sharding planner against TorchRec's own planner, on the same tables and clusters.
Target (issue 22): distscope's sharding is never slower than TorchRec's under distscope's step model, and
each rank's cost is reported beside TorchRec's estimate. Also: planner wall time side by side.

    python benchmarks/torchrec_compare.py [--write-reference]

With TorchRec importable (search/torchrec_plan.py says how to install it against this torch), each case
runs TorchRec's EmbeddingShardingPlanner live; `--write-reference` also stores its plans in
data/reference/torchrec_plans.json, which tests/search/test_embedding_plan.py prices on machines without
TorchRec. Without TorchRec, the stored plans are priced instead (and its planner time is not measured).
Nothing here is fitted: both plans are priced by model/embedding_cost.estimate_dlrm.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from _results import save
from distscope.model.embedding_cost import estimate_dlrm, sharding_counts
from distscope.search import torchrec_plan as trp
from distscope.search.embedding_plan import plan_embeddings
from distscope.search.sharding_file import parse_sharding
from distscope.system.presets import get_cluster
from distscope.workload.embedding import load_dlrm, parse_dlrm

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "data/reference/torchrec_plans.json"
CASES = [  # (model, cluster, gpus, global batch)
    ("dlrm:mlperf-dcnv2", "dgx-h100", 8, 65536),
    ("dlrm:mlperf-dcnv2", "dgx-h100", 16, 65536),
    ("dlrm:mlperf-dcnv2", "dgx-h100", 64, 65536),
    ("dlrm:mlperf-dcnv2", "dgx-a100", 128, 65536),
    ("dlrm:mlperf-dcnv2", "dgx-h100", 256, 65536),
    ("dlrm:examples/dlrm/tables.yaml", "dgx-h100", 8, 32768),
    ("dlrm:examples/dlrm/tables.yaml", "dgx-h100", 32, 32768),
    ("dlrm:examples/dlrm/tables.yaml", "dgx-a100", 64, 32768),
    ("dlrm:examples/dlrm/tables.yaml", "dgx-h100", 128, 32768),
]


# Random table sets. Seed 2026's set was seen while the planner was built (two of its 12 cases were
# slower than TorchRec's plan then, which led to the memory-aware start and the coarse search); seed
# 2027's set was generated and run once, after the planner was frozen: the out-of-sample figure.
SEEDS = {"seen": 2026, "fresh": 2027}


def held_out(k: int, seed: int = SEEDS["seen"], tag: str = "random") -> list[tuple[dict, str, int, int]]:
    """k random table sets and clusters (seeded): 10-60 tables, rows log-uniform in 1e2..1e8, dims 32-256,
    pooling log-uniform in 1..100."""
    rng = np.random.default_rng(seed)
    out = []
    for j in range(k):
        tables = [{"name": f"t{i}", "rows": int(10 ** rng.uniform(2, 8)), "dim": int(rng.choice([32, 64, 128, 256])),
                   "pooling": round(float(10 ** rng.uniform(0, 2)), 1)} for i in range(int(rng.integers(10, 61)))]
        spec = {"name": f"{tag}-{j}", "bottom_mlp": [512, 256, 128], "top_mlp": [1024, 512, 256, 1],
                "interaction": "dcn", "dcn_layers": 2, "dcn_rank": 256, "tables": tables}
        gpus = int(rng.choice([8, 16, 32, 64, 128]))
        out.append((spec, str(rng.choice(["dgx-h100", "dgx-a100"])), gpus, gpus * int(rng.choice([256, 512, 1024]))))
    return out


def _key(model: str, cluster: str, gpus: int, batch: int) -> str:
    return f"{model}|{cluster}|{gpus}|{batch}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-reference", action="store_true", help="store TorchRec's plans (needs TorchRec)")
    ap.add_argument("--held-out", type=int, default=12, help="random table sets besides the named cases")
    args = ap.parse_args()
    live = trp.available()
    if args.write_reference and not live:
        raise SystemExit(f"--write-reference needs TorchRec: {trp.INSTALL}")
    stored = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {"cases": {}}
    reference: dict = {"torchrec": None, "cases": {}}
    if live:
        import importlib.metadata as md

        reference["torchrec"] = {p: md.version(p) for p in ("torchrec", "fbgemm-gpu-cpu", "torch")}
    rows = []
    cases: list[tuple[str | dict, str, int, int]] = [*CASES, *held_out(args.held_out),
                                                     *held_out(args.held_out, SEEDS["fresh"], "fresh")]
    for model, cname, gpus, batch in cases:
        if isinstance(model, dict):
            spec, model = parse_dlrm(model, model["name"]), f"held-out:{model['name']}"
        else:
            spec = load_dlrm(model.replace("dlrm:examples", f"dlrm:{ROOT}/examples"))
        key = _key(model, cname, gpus, batch)
        cluster = get_cluster(cname, gpus)
        t0 = time.perf_counter()
        ours = plan_embeddings(spec, cluster, global_batch=batch)
        ours_s = time.perf_counter() - t0
        tr_s = None
        if live:
            t0 = time.perf_counter()
            tr, tr_ranks = trp.torchrec_plan(spec, cluster, global_batch=batch)
            tr_s = time.perf_counter() - t0
            reference["cases"][key] = {"tables": [ts.to_dict() for ts in tr], "rank_estimate_s": list(tr_ranks)}
            if model.startswith("held-out:"):
                reference["cases"][key]["spec"] = next(c[0] for c in cases if isinstance(c[0], dict)
                                                       and c[0]["name"] == spec.name)
        elif key in stored["cases"]:
            case = stored["cases"][key]
            tr = parse_sharding({"tables": case["tables"]}, spec, cluster, str(REFERENCE))
            tr_ranks = tuple(case["rank_estimate_s"])
        else:
            print(f"{key}: no TorchRec here and no stored plan; skipped")
            continue
        theirs = estimate_dlrm(spec, cluster, tr, global_batch=batch)
        kinds = sharding_counts(tr)
        row = {"model": model, "held_out": model.startswith("held-out:"), "cluster": cname, "gpus": gpus, "global_batch": batch,
               "distscope_step_ms": ours.estimate.step_time_s * 1e3,
               "torchrec_plan_step_ms": theirs.step_time_s * 1e3,
               "ratio": ours.estimate.step_time_s / theirs.step_time_s,
               "distscope_types": ours.counts(), "torchrec_types": kinds,
               "torchrec_feasible_in_distscope": theirs.feasible,
               "distscope_rank_lookup_ms_max": max(ours.estimate.rank_lookup_s) * 1e3,
               "torchrec_rank_estimate_ms_max": max(tr_ranks) * 1e3,
               "torchrec_plan_rank_lookup_ms_max": max(theirs.rank_lookup_s) * 1e3,
               "distscope_plan_s": ours_s, "torchrec_plan_s": tr_s, "source": "live" if live else "stored"}
        rows.append(row)
        print(f"{key}: distscope {row['distscope_step_ms']:.3f} ms {row['distscope_types']} ({ours_s:.2f} s) · "
              f"TorchRec's plan {row['torchrec_plan_step_ms']:.3f} ms {kinds}"
              + (f" ({tr_s:.2f} s)" if tr_s is not None else " (stored)")
              + f" · ratio {row['ratio']:.3f}; TorchRec's own max-rank estimate {row['torchrec_rank_estimate_ms_max']:.3f} ms")
    if args.write_reference:
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(json.dumps(reference, indent=1) + "\n")
    worst = max((r["ratio"] for r in rows), default=None)
    held = [r["ratio"] for r in rows if r["held_out"]]
    fresh = [r["ratio"] for r in rows if r["model"].startswith("held-out:fresh-")]
    timed = [r for r in rows if r["torchrec_plan_s"]]
    save("torchrec_compare", {
        "cases": rows, "worst_ratio": worst, "held_out_worst_ratio": max(held, default=None),
        "held_out_slower": sum(1 for x in held if x > 1.0 + 1e-9), "held_out_cases": len(held),
        "fresh_worst_ratio": max(fresh, default=None), "fresh_slower": sum(1 for x in fresh if x > 1.0 + 1e-9),
        "fresh_cases": len(fresh), "fresh_median_ratio": float(np.median(fresh)) if fresh else None,
        "named_cases": len(CASES), "named_worst_ratio": max((r["ratio"] for r in rows if not r["held_out"]), default=None),
        "distscope_plan_s_max": max((r["distscope_plan_s"] for r in rows), default=None),
        "torchrec_plan_s_max": max((r["torchrec_plan_s"] or 0.0 for r in rows), default=None), "never_slower": worst is not None and worst <= 1.0 + 1e-9,
        "torchrec": reference["torchrec"] or stored.get("torchrec"),
        "plan_time_ratio_median": (sorted(r["distscope_plan_s"] / r["torchrec_plan_s"] for r in timed)[len(timed) // 2]
                                   if timed else None)})


if __name__ == "__main__":
    main()
