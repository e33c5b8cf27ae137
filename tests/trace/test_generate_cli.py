"""`distscope trace generate` -> `distscope simulate --cluster` end to end, against `distscope estimate`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PLAN = [
    "--model",
    "llama3-8b",
    "--cluster",
    "dgx-h100",
    "--gpus",
    "16",
    "--tp",
    "2",
    "--pp",
    "2",
    "--global-batch",
    "16",
    "--seq",
    "2048",
    "--zero",
    "0",
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distscope", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )


def test_generate_then_simulate_full_and_symmetric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _cli("trace", "generate", *PLAN, "-o", str(tmp_path / "full"), "--json")
    assert gen.returncode == 0, gen.stderr
    summary = json.loads(gen.stdout)
    assert summary["ranks"] == 16 and summary["files"] == 16
    assert len(list((tmp_path / "full").glob("step.*.et"))) == 16
    gen = _cli("trace", "generate", *PLAN, "-o", str(tmp_path / "sym"), "--symmetric", "--json")
    assert gen.returncode == 0, gen.stderr
    assert json.loads(gen.stdout)["files"] == 2 and (tmp_path / "sym" / "manifest.json").is_file()

    info = _cli("trace", "info", str(tmp_path / "full"), "--json")
    kinds = json.loads(info.stdout)["by_kind"]
    assert kinds["COMP"] > 0 and kinds["COMM_COLL"] > 0 and kinds["COMM_SEND"] == kinds["COMM_RECV"] > 0

    full = _cli("simulate", str(tmp_path / "full"), "--cluster", "dgx-h100", "--gpus", "16", "--json")
    sym = _cli("simulate", str(tmp_path / "sym"), "--cluster", "dgx-h100", "--gpus", "16", "--json")
    assert full.returncode == 0 and sym.returncode == 0, full.stderr + sym.stderr
    a, b = json.loads(full.stdout), json.loads(sym.stdout)
    assert a["step_time_s"] == pytest.approx(b["step_time_s"], rel=1e-9)
    assert b["simulated_ranks"] == 2
    est = json.loads(_estimate_without_interference(capsys))
    est_s = est["step_time_s"] if "step_time_s" in est else est["estimate"]["step_time_s"]
    # ET files store durations in whole microseconds, so allow for that rounding on top of 3%.
    assert a["step_time_s"] == pytest.approx(est_s, rel=0.03)


def _estimate_without_interference(capsys: pytest.CaptureFixture[str]) -> str:
    """`distscope estimate --json` with the estimator's overlap-interference term ρ at 0: the
    simulator does not model compute slowed by the communication hidden beside it (sim/README.md)."""
    from distscope.cli import main
    from distscope.model import efficiency as eff
    from distscope.validate.calibration import calibrated

    capsys.readouterr()
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):
        try:
            main(["estimate", *PLAN, "--json"])
        except SystemExit as exc:
            assert not exc.code, exc.code
    return capsys.readouterr().out


def test_generate_rejects_bad_plan(tmp_path: Path) -> None:
    bad = _cli("trace", "generate", *PLAN[:-4], "--tp", "3", "-o", str(tmp_path))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "tp" in bad.stderr
    wrong = _cli("simulate", str(tmp_path), "--cluster", "dgx-h100")
    assert wrong.returncode == 2 and "--gpus" in wrong.stderr


@pytest.mark.parametrize("verb", [("generate", *PLAN), ("capture", "--", sys.executable, "-c", "pass")])
def test_an_empty_out_is_refused_and_nothing_is_written(verb: tuple[str, ...], tmp_path: Path) -> None:
    """typer turns --out '' into '.': generate would write its traces, and capture clear earlier capture
    files, in the working directory."""
    proc = subprocess.run([sys.executable, "-m", "distscope", "trace", verb[0], "--out", "", *verb[1:]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert proc.returncode == 2 and proc.stderr.strip() == "distscope: error: --out='': an empty output path; name a file or folder"
    assert not list(tmp_path.iterdir())


def test_software_preset_reaches_the_trace() -> None:
    """A software preset prices the trace as it prices the estimate: FP8 weight gathers of a stack that
    gathers FP8 weights carry half the bytes, and a PyTorch-native stack's compute is slower."""
    from distscope.dtypes import Precision
    from distscope.plan import Plan
    from distscope.software.presets import get_software
    from distscope.system.presets import get_cluster
    from distscope.trace.builder import CommOp
    from distscope.trace.from_plan import step_spec
    from distscope.workload.catalog import get_model
    from distscope.workload.training import TrainingShape

    spec, shape, cluster = get_model("llama3-8b"), TrainingShape(seq_len=2048, global_batch=16), get_cluster("dgx-h100", 8)
    plan = Plan(dp=8, zero_stage=3, micro_batch=1, precision=Precision.FP8)

    def gathered(s) -> int:  # type: ignore[no-untyped-def]
        return sum(op.size_bytes for ex in s.extras for op in ex.mb_gather if isinstance(op, CommOp))

    plain = step_spec(spec, shape, cluster, plan)
    titan = step_spec(spec, shape, cluster, plan, software=get_software("torchtitan-2025"))
    assert gathered(titan) == pytest.approx(gathered(plain) / 2, rel=1e-3)
    assert titan.stages[0][0].fwd_s > plain.stages[0][0].fwd_s


def test_fp8_tensor_parallel_all_gathers_move_fp8_where_the_stack_does() -> None:
    """torchao's float8 tensor parallel (torchtitan) gathers FP8-cast layer inputs and output gradients:
    half the all-gather bytes of a Megatron/TE stack's, the reduce-scatters unchanged, and the estimator's
    exposed TP time shorter by the same collectives (the trace and the estimate share the rule)."""
    from distscope.dtypes import Precision
    from distscope.model import estimate
    from distscope.plan import Plan
    from distscope.software.presets import get_software
    from distscope.system.presets import get_cluster
    from distscope.trace.from_plan import step_spec
    from distscope.trace.graph import CollKind
    from distscope.workload.catalog import get_model
    from distscope.workload.training import TrainingShape

    spec, shape, cluster = get_model("llama3-8b"), TrainingShape(seq_len=2048, global_batch=16), get_cluster("dgx-h100", 8)
    plan = Plan(dp=1, tp=8, sequence_parallel=True, micro_batch=1, precision=Precision.FP8)
    titan, core = get_software("torchtitan-2025"), get_software("megatron-core-0.8")

    def layer_bytes(sw, kind):  # type: ignore[no-untyped-def]
        layer = step_spec(spec, shape, cluster, plan, software=sw).stages[0][1]
        return sum(op.size_bytes for op in layer.fwd_comm + layer.bwd_comm if op.kind is kind)

    assert layer_bytes(titan, CollKind.ALL_GATHER) == pytest.approx(layer_bytes(core, CollKind.ALL_GATHER) / 2, rel=1e-3)
    assert layer_bytes(titan, CollKind.REDUCE_SCATTER) == layer_bytes(core, CollKind.REDUCE_SCATTER)
    bf16 = Plan(dp=1, tp=8, sequence_parallel=True, micro_batch=1, precision=Precision.BF16)
    assert estimate(spec, shape, cluster, plan, software=titan).comm_total_s["tp"] < \
        estimate(spec, shape, cluster, bf16, software=titan).comm_total_s["tp"]


@pytest.mark.parametrize("overlap", ["dp", "dp,tp"])
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_torchtitan_tensor_parallel_plans_simulate_as_estimated(overlap: str, precision: str) -> None:
    """Per-op selective recompute's re-gathers and torchao's FP8 all-gathers are in the trace as the
    estimator prices them: the simulated step equals the estimate (overlap interference ρ at 0)."""
    from distscope.dtypes import Precision
    from distscope.model import efficiency as eff
    from distscope.model import estimate
    from distscope.plan import Plan, Recompute
    from distscope.scenario import parse_overlap
    from distscope.sim.api import simulate_traces
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.software.presets import get_software
    from distscope.system.presets import get_cluster
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec
    from distscope.validate.calibration import calibrated
    from distscope.workload.catalog import get_model
    from distscope.workload.training import TrainingShape

    spec, shape, cluster = get_model("llama3-8b"), TrainingShape(seq_len=8192, global_batch=16), get_cluster("dgx-h100", 16)
    plan = Plan(dp=2, tp=8, sequence_parallel=True, micro_batch=1, precision=Precision(precision), zero_stage=1,
                distributed_optimizer=True, recompute=Recompute.SELECTIVE_OP, overlap=parse_overlap(overlap))
    sw = get_software("torchtitan-2025")
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):
        est = estimate(spec, shape, cluster, plan, software=sw)
        traces = build_traces(step_spec(spec, shape, cluster, plan, software=sw), symmetric=True)
    assert simulate_traces(traces, ClusterNetwork(cluster)).step_time_s == pytest.approx(est.step_time_s, rel=0.01)


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1", "dualpipe"])
def test_fsdp_gradient_reduce_scatter_starts_with_each_micro_batchs_backward(schedule: str) -> None:
    """With layer-by-layer reduce-scatter (FSDP2 / Megatron-FSDP) every micro-batch's early share is in
    the trace, including those whose first backward runs paired with a forward (DualPipe)."""
    from distscope.plan import Plan, Schedule
    from distscope.scenario import parse_overlap
    from distscope.software.presets import get_software
    from distscope.system.presets import get_cluster
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec
    from distscope.workload.catalog import get_model
    from distscope.workload.training import TrainingShape

    spec, shape, cluster = get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=32), get_cluster("dgx-h100", 16)
    plan = Plan(dp=4, pp=4, zero_stage=3, micro_batch=1, schedule=Schedule(schedule), overlap=parse_overlap("dp"))
    traces = build_traces(step_spec(spec, shape, cluster, plan, software=get_software("megatron-core-2025")),
                          symmetric=True)
    micro_batches = shape.global_batch // (plan.dp * plan.micro_batch)
    for graph in traces.graphs.values():
        names = [node.name for node in graph.nodes]
        assert sum(n.startswith("zero3_reduce_scatter0_early_mb") for n in names) == micro_batches
        assert sum(n.startswith("zero3_reduce_scatter0_mb") for n in names) == micro_batches
