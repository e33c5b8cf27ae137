"""Speed of `distscope simulate`.

Figures (last line: one JSON object):
* allreduce_1024_ring_64MiB: the 1024-NPU 64 MiB all-reduce on a 1-D ring (ASTRA-sim config of
  data/validation/astra_sim, 1024 NPUs), traces from `chakra_generator`; wall time of the symmetric
  path (compile + simulate) and, separately, of reading the 1024 ET files and of the full per-rank path.
  ASTRA-sim takes about 10 s here (README: 8-11 s on 2 cores).

* gpt3_175b_1024_full: GPT-3 175B on 1024 A100s (dgx-a100 preset), tp8 pp8 dp16, 1F1B, micro-batch 1,
  global batch 1536, seq 2048, selective recompute: every rank simulated (no symmetry folding); wall time
  of trace generation, compile (validation + matching) and simulation, and events/s.
* llama405b_16384_symmetric: Llama 3.1 405B on 16,384 H100s (dgx-h100), tp8 pp16 dp128, 1F1B,
  global batch 2048, seq 8192: one trace per pipeline stage (16 simulated ranks); target <= 1 s.
* estimate_consistency: |simulated / estimated - 1| over every row of published_runs.csv
  (unaware mode), max and per row.

Usage: python benchmarks/simulate_speed.py [--json-out FILE] [--skip-full] [--skip-consistency]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _results import save
from distscope.sim.api import run_traces
from distscope.sim.astra_config import read_network, read_system
from distscope.sim.network import AstraNetwork, NetworkMode
from distscope.sim.result import summarize
from distscope.trace.chakra_io import read_traces

REPO = Path(__file__).resolve().parents[1]
ASTRA = REPO / "data" / "validation" / "astra_sim"
ASTRA_WALL_S = 10.0


def _best(fn, repeat: int = 3):  # type: ignore[no-untyped-def]
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def allreduce_1024(tmp: Path) -> dict[str, float]:
    npus, size = 1024, 64 << 20
    subprocess.run(
        ["chakra_generator", "--num_npus", str(npus), "--default_comm_size", str(size)],
        cwd=tmp,
        check=True,
        capture_output=True,
        timeout=600,
    )
    net_path = tmp / "net_1d_Ring_1024.yml"
    net_path.write_text(
        (ASTRA / "net_1d_Ring_64.yml").read_text().replace("[ 64 ]", f"[ {npus} ]").replace("total 64", f"total {npus}")
    )
    net = read_network(net_path)
    system = read_system(ASTRA / "sys_ring_1d.json", 1)
    model = AstraNetwork(net, system, NetworkMode.UNAWARE)
    read_s, traces = _best(lambda: read_traces(tmp / "ALL_REDUCE"), repeat=1)
    sym_s, sym = _best(lambda: run_traces(traces, model, symmetric=True))
    full_s, full = _best(lambda: run_traces(traces, model, symmetric=False), repeat=1)
    rs, rf = summarize(sym), summarize(full)
    assert rs.step_time_s == rf.step_time_s
    return {
        "finish_ns": rs.step_time_s * 1e9,
        "symmetric_wall_s": sym_s,
        "read_1024_et_wall_s": read_s,
        "symmetric_plus_read_wall_s": sym_s + read_s,
        "full_per_rank_wall_s": full_s,
        "simulated_ranks": rs.simulated_ranks,
        "speedup_vs_astra_sim": ASTRA_WALL_S / sym_s,
        "speedup_vs_astra_sim_incl_read": ASTRA_WALL_S / (sym_s + read_s),
    }


def _scenario(model: str, cluster: str, gpus: int, *, global_batch: int = 1536, seq: int = 2048,
              **kw: object):  # type: ignore[no-untyped-def]
    from distscope.scenario import PlanFlags, SystemFlags, WorkloadFlags, build_scenario

    plan = PlanFlags(**{"sequence_parallel": False, "zero": 0, "distributed_optimizer": False, "recompute": "none",
                        "overlap": "none", "attention": "flash", **kw})  # type: ignore[arg-type]
    return build_scenario(WorkloadFlags(model=model, global_batch=global_batch, seq=seq),
                          SystemFlags(cluster=cluster, gpus=gpus), plan)


def step_figure(sc, *, symmetric: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from distscope.model.estimate import estimate
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.sim.engine import simulate_program
    from distscope.sim.program import compile_program
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec
    from distscope.trace.gcpause import gc_paused

    t0 = time.perf_counter()
    traces = build_traces(step_spec(sc.spec, sc.shape, sc.cluster, sc.plan), symmetric=symmetric)
    t1 = time.perf_counter()
    with gc_paused():  # as run_traces does
        program = compile_program(traces, ClusterNetwork(sc.cluster), symmetric=False, with_resources=False)
        t2 = time.perf_counter()
        outcome = simulate_program(program)
    t3 = time.perf_counter()
    result = summarize(outcome)
    nodes = sum(len(g.nodes) for g in traces.graphs.values())
    return {
        "ranks": traces.num_ranks,
        "simulated_ranks": result.simulated_ranks,
        "nodes": nodes,
        "events": outcome.events,
        "step_time_s": result.step_time_s,
        "estimate_step_time_s": estimate(sc.spec, sc.shape, sc.cluster, sc.plan).step_time_s,
        "generate_wall_s": t1 - t0,
        "compile_wall_s": t2 - t1,
        "simulate_wall_s": t3 - t2,
        "simulate_plus_compile_wall_s": t3 - t1,
        "total_wall_s": t3 - t0,
        "events_per_s": outcome.events / (t3 - t2),
        "nodes_per_s_compile_plus_simulate": nodes / (t3 - t1),
    }


def consistency() -> dict[str, object]:
    from distscope.model import efficiency as eff
    from distscope.sim.api import simulate_traces
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec
    from distscope.validate.calibration import calibrated
    from distscope.validate.cluster_from_row import cluster_for
    from distscope.validate.harness import predict_row
    from distscope.validate.rows import parse_row, read_rows
    from distscope.workload.training import TrainingShape

    errs: dict[str, float] = {}
    t0 = time.perf_counter()
    for line, raw in read_rows(str(REPO / "data" / "validation" / "published_runs.csv")):
        row = parse_row(raw, line)
        with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):  # ρ: not in the simulator (sim/README.md)
            res = predict_row(row)
        if res.plan is None or res.predicted_step_time_s is None:
            continue
        cl = cluster_for(row.gpu, row.num_gpus, row.gpus_per_node, row.intra_node_GBps, row.inter_node_GBps_per_gpu)
        spec = step_spec(row.spec, TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch), cl, res.plan,
                         software=row.software)
        sim = simulate_traces(build_traces(spec, symmetric=True), ClusterNetwork(cl))
        errs[row.run_id] = 100 * (sim.step_time_s / res.predicted_step_time_s - 1)
    worst = max(errs, key=lambda k: abs(errs[k]))
    return {
        "rows": len(errs),
        "max_abs_error_pct": abs(errs[worst]),
        "worst_row": worst,
        "mean_abs_error_pct": sum(abs(v) for v in errs.values()) / len(errs),
        "wall_s": time.perf_counter() - t0,
        "per_row_error_pct": {k: round(v, 3) for k, v in errs.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json-out", type=Path, default=None, help="Also write the JSON figures here.")
    ap.add_argument("--skip-full", action="store_true", help="Skip the 1024-rank GPT-3 full simulation.")
    ap.add_argument("--skip-consistency", action="store_true", help="Skip the published-runs consistency sweep.")
    args = ap.parse_args()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        figures["allreduce_1024_ring_64MiB"] = allreduce_1024(Path(d))
    llama = _scenario(
        "llama3.1-405b",
        "dgx-h100",
        16384,
        tp=8,
        pp=16,
        global_batch=2048,
        seq=8192,
        sequence_parallel=True,
        distributed_optimizer=True,
        overlap="dp,tp,pp",
        stage_layers="7," + ",".join(["8"] * 14) + ",7",
    )
    figures["llama405b_16384_symmetric"] = step_figure(llama, symmetric=True)
    if not args.skip_full:
        gpt3 = _scenario("gpt3-175b", "dgx-a100", 1024, tp=8, pp=8, global_batch=1536, seq=2048, recompute="selective")
        figures["gpt3_175b_1024_full"] = step_figure(gpt3, symmetric=False)
    if not args.skip_consistency:
        figures["estimate_consistency"] = consistency()
    print(f"{'figure':<28} {'key':<32} {'value':>14}")
    for name, vals in figures.items():
        assert isinstance(vals, dict)
        for k, v in vals.items():
            if isinstance(v, int | float):
                print(f"{name:<28} {k:<32} {v:>14.6g}")
            elif not isinstance(v, dict):
                print(f"{name:<28} {k:<32} {v!s:>14}")
    line = json.dumps(figures)
    if args.json_out:
        args.json_out.write_text(line + "\n")
    save("simulate_speed", figures)


if __name__ == "__main__":
    main()
