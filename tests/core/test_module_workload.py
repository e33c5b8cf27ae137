"""Any torch.nn.Module as a workload (workload/module_graph.py, model/module_estimate.py): the traced op
graph's FLOPs against torch's own counter and a published model size, the data-parallel pricing rules,
and one-line refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from distscope.cli import main
from distscope.errors import DistscopeError
from distscope.model.module_estimate import estimate_module
from distscope.system import get_cluster
from distscope.workload.module_graph import OpKind, Phase, parse_inputs, trace_module
from tests.cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples/modules"))
from resnet import resnet50  # noqa: E402


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(256, 1024, bias=False), nn.GELU(), nn.Linear(1024, 512, bias=False))


def test_mlp_flops_are_forward_plus_both_gradients_except_the_inputs() -> None:
    g = trace_module(_mlp, parse_inputs("x:32x256:bf16"), "mlp")
    fwd = 2 * 32 * (256 * 1024 + 1024 * 512)
    assert g.flops(Phase.FORWARD) == fwd
    # weight gradients of both layers, the input gradient of the second only (x needs none)
    assert g.flops(Phase.BACKWARD) == fwd + 2 * 32 * 1024 * 512
    assert g.params == 256 * 1024 + 1024 * 512


def test_resnet50_matches_torch_flop_counter_and_the_published_size() -> None:
    """torchvision's model table: ResNet-50 (v1.5) 25.6M parameters, 4.09 GMACs per 224x224 image."""
    g = trace_module(resnet50, parse_inputs("x:2x3x224x224:fp32"), "resnet50")
    with torch.device("meta"):
        m = resnet50()
    x = torch.empty(2, 3, 224, 224, device="meta")
    with FlopCounterMode(display=False) as fc:
        m(x).sum().backward()
    assert g.flops() == fc.get_total_flops()
    assert g.params == 25_557_032
    assert g.flops(Phase.FORWARD) / 2 / 2 == pytest.approx(4.09e9, rel=0.005)
    assert {o.kind for o in g.ops} >= {OpKind.CONV, OpKind.GEMM, OpKind.MEMORY}
    assert g.saved_bytes > 0


def test_winograd_shapes_are_resnet50s_ungrouped_unit_stride_3x3_layers() -> None:
    """ResNet-50 v1.5 has 16 3x3 convolutions; the 3 that open stages 2-4 have stride 2, leaving 13 that
    cuDNN can run as Winograd (forward, and each backward); ResNeXt's grouped ones and the stem cannot."""
    g = trace_module(resnet50, parse_inputs("x:2x3x224x224:fp32"), "resnet50")
    fwd = [o for o in g.ops if o.kind is OpKind.CONV and o.phase is Phase.FORWARD]
    assert sum(o.taps == 9 for o in fwd) == 16
    assert sum(o.winograd for o in fwd) == 13
    assert all(o.taps == 9 and o.groups == 1 for o in g.ops if o.winograd)
    grouped = trace_module(lambda: nn.Conv2d(64, 64, 3, padding=1, groups=16), parse_inputs("x:2x64x8x8:fp32"), "g")
    assert not any(o.winograd for o in grouped.ops)


@pytest.fixture(scope="module")
def resnet() -> object:
    return trace_module(resnet50, parse_inputs("x:64x3x224x224:bf16"), "resnet50")


def test_one_gpu_has_no_data_parallel_term_and_more_micro_batches_scale_compute(resnet) -> None:  # type: ignore[no-untyped-def]
    c = get_cluster("dgx-a100", 8)
    one = estimate_module(resnet, c, dp=1, zero=0, global_batch=64)
    four = estimate_module(resnet, c, dp=1, zero=0, global_batch=256)
    assert one.breakdown_s["dp"] == 0.0 and one.micro_batches == 1 and four.micro_batches == 4
    assert four.breakdown_s["conv"] == pytest.approx(4 * one.breakdown_s["conv"])
    per_step = ("optimizer", "dp")  # once per step, not per micro-batch
    busy = [e.step_time_s - sum(e.breakdown_s[k] for k in per_step) for e in (one, four)]
    assert busy[1] == pytest.approx(4 * busy[0])


def test_fsdp_shards_the_state_and_pays_per_micro_batch_traffic(resnet) -> None:  # type: ignore[no-untyped-def]
    c = get_cluster("dgx-h100", 64)
    ddp = estimate_module(resnet, c, dp=64, zero=0, global_batch=64 * 64)
    fsdp = estimate_module(resnet, c, dp=64, zero=3, global_batch=64 * 64)
    assert fsdp.memory_bytes["optimizer"] == pytest.approx(ddp.memory_bytes["optimizer"] / 64)
    assert fsdp.memory_bytes["activations"] == ddp.memory_bytes["activations"]
    assert ddp.breakdown_s["dp"] > 0  # the last gradient bucket is never hidden


def test_a_tiny_model_is_host_bound() -> None:
    g = trace_module(_mlp, parse_inputs("x:1x256:bf16"), "mlp")
    e = estimate_module(g, get_cluster("dgx-h100", 8), dp=1, zero=0, global_batch=1)
    assert e.breakdown_s["host"] > 0


def _run(capsys, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    return run_cli(capsys, "estimate", *args)


def test_cli_estimates_a_module_file(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out = _run(capsys, "--model", f"torch:{ROOT}/examples/modules/resnet.py:resnet50", "--input", "x:32x3x224x224:bf16",
                     "--cluster", "dgx-a100", "--gpus", "8", "--global-batch", "512", "--json")
    assert code == 0, out
    d = json.loads(out)
    assert d["params"] == 25_557_032 and d["micro_batches"] == 2 and d["feasible"]
    assert d["step_time_s"] == pytest.approx(sum(d["breakdown_s"].values()))


@pytest.mark.parametrize(("args", "says"), [
    (("--tp", "2"), "--tp=2"),
    (("--input", "x:8xAx3:bf16"), "name:shape:dtype"),
    (("--input", "x:8x3x32x32:int4"), "dtype 'int4'"),
    (("--zero", "1"), "--zero=1"),
    (("--global-batch", "100"), "not a multiple"),
])
def test_bad_input_is_one_line(capsys, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    base = {"--input": "x:8x3x32x32:bf16"}
    argv = ["--model", f"torch:{ROOT}/examples/modules/resnet.py:resnet50"]
    if "--input" not in args:
        argv += ["--input", base["--input"]]
    code, out = _run(capsys, *argv, *args)
    assert code != 0 and says in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1, out


def test_other_verbs_and_missing_files_are_refused_in_one_line(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out = _run(capsys, "--model", f"torch:{tmp_path}/none.py:f", "--input", "x:1x3:bf16")
    assert code != 0 and "does not exist" in out
    try:
        main(["explore", "--model", "torch:x.py:f", "--gpus", "8"])  # explore takes modules: it needs the input
    except SystemExit as exc:
        assert exc.code != 0
    err = capsys.readouterr().err
    assert "needs --input" in err and len(err.strip().splitlines()) == 1
    from distscope.workload.catalog import get_model

    with pytest.raises(DistscopeError, match=r"priced by `distscope estimate`.*swept by `distscope explore`"):
        get_model("torch:x.py:f")  # the verbs that take transformers only (serve, report, ...) say where to go
    try:
        main(["trace", "generate", "--out", str(tmp_path / "t"), "--model", "torch:x.py:f"])  # it needs the input
    except SystemExit as exc:
        assert exc.code != 0
    err = capsys.readouterr().err
    assert "--input is required" in err and len(err.strip().splitlines()) == 1
    try:
        main(["plan", "--model", "torch:x.py:f"])  # plan takes modules (search/module_plan.py): it needs the input
    except SystemExit as exc:
        assert exc.code != 0
    err = capsys.readouterr().err
    assert "--input is required" in err and len(err.strip().splitlines()) == 1


def test_inference_utilization_grows_with_batch_and_splits_by_child() -> None:
    from distscope.model.module_estimate import infer_module
    from distscope.system.device import get_device

    dev = get_device("h100-sxm5-80gb")
    runs = [infer_module(trace_module(resnet50, parse_inputs(f"x:{b}x3x224x224:bf16"), "r50", inference=True), dev)
            for b in (1, 32)]
    assert runs[0].utilization < runs[1].utilization
    assert runs[0].latency_s < runs[1].latency_s and runs[0].samples_per_s < runs[1].samples_per_s
    big = runs[1]
    assert len(big.per_module) > 15  # the stem, 16 bottlenecks, the head
    assert sum(t for _, t, _ in big.per_module) == pytest.approx(big.latency_s)  # GPU-bound at 32: nothing else


def test_inference_cli_sweeps_batches_and_refuses_training_flags(capsys) -> None:  # type: ignore[no-untyped-def]
    ref = f"torch:{ROOT}/examples/modules/resnet.py:resnet50"
    code, out = _run(capsys, "--model", ref, "--input", "x:8x3x224x224:bf16", "--inference", "--batches", "1,8", "--json")
    assert code == 0, out
    assert [r["batch"] for r in json.loads(out)["runs"]] == [1, 8]
    for args, says in ((("--inference", "--dp", "2"), "--dp and --zero"), (("--inference", "--batches", "0,2"), "--batches"),
                       (("--batches", "2"), "add --inference")):
        code, out = _run(capsys, "--model", ref, "--input", "x:8x3x224x224:bf16", *args)
        assert code != 0 and says in out and len(out.strip().splitlines()) == 1, out
    code, out = _run(capsys, "--model", "llama3-8b", "--inference")
    assert code != 0 and "distscope serve" in out


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(st.text(max_size=40))
def test_any_input_spec_parses_or_is_one_line(text: str) -> None:
    """--input: a valid spec or one DistscopeError naming it, never an internal error."""
    try:
        specs = parse_inputs(text)
    except DistscopeError as exc:
        assert "\n" not in str(exc) and "--input" in str(exc)
        return
    assert specs and all(s.shape and min(s.shape) >= 1 for s in specs)


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(st.lists(st.integers(min_value=0, max_value=4096), min_size=1, max_size=5),
       st.sampled_from(["bf16", "fp16", "tf32", "fp32", "int8", "BF16"]))
def test_shaped_specs_round_trip(dims: list[int], dtype: str) -> None:
    text = f"x:{'x'.join(map(str, dims))}:{dtype}"
    ok = min(dims) >= 1 and dtype.lower() in ("bf16", "fp16", "tf32", "fp32")
    try:
        (spec,) = parse_inputs(text)
    except DistscopeError:
        assert not ok
        return
    assert ok and spec.shape == tuple(dims)


class _Attend(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.kv = nn.Linear(64, 64), nn.Linear(32, 128)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        q = self.q(x).view(2, -1, 4, 16).transpose(1, 2)
        k, v = (t.view(2, -1, 4, 16).transpose(1, 2) for t in self.kv(ctx).chunk(2, dim=-1))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


@pytest.mark.parametrize("inference", [True, False])
def test_sdpa_is_one_fused_attention_per_pass_with_its_shape_and_torchs_flops(inference: bool) -> None:
    """On the meta device SDPA would decompose into its math path (bmm, softmax, casts), which no GPU
    runs; the trace keeps one fused op per pass. Its forward has the FLOPs torch's counter gives the math
    path; its backward has more (the fused kernel recomputes the scores, which the math path saves)."""
    g = trace_module(_Attend, parse_inputs("x:2x96x64:fp16,ctx:2x80x32:fp16"), "attend", inference=inference)
    attn = [o for o in g.ops if o.kind is OpKind.ATTENTION]
    assert [o.phase for o in attn] == [Phase.FORWARD] + ([] if inference else [Phase.BACKWARD])
    assert all(o.attn is not None and (o.attn.batch_heads, o.attn.seq_q, o.attn.seq_kv, o.attn.d_qk, o.attn.causal)
               == (8, 96, 80, 16, True) for o in attn)
    assert not any(o.name in ("bmm", "_safe_softmax") for o in g.ops)
    with torch.device("meta"):
        m = _Attend().half()
    x, c = torch.empty(2, 96, 64, device="meta", dtype=torch.half), torch.empty(2, 80, 32, device="meta", dtype=torch.half)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        m(x, c)
    assert g.flops(Phase.FORWARD) == fc.get_total_flops()


def test_convolutions_and_group_norms_carry_their_patch_boundary_bytes() -> None:
    g = trace_module(lambda: nn.Sequential(nn.Conv2d(4, 64, 3, padding=1), nn.GroupNorm(32, 64),
                                           nn.Conv2d(64, 64, 1)), parse_inputs("x:2x4x16x24:fp16"), "convs",
                     inference=True)
    conv3, conv1 = [o for o in g.ops if o.kind is OpKind.CONV]
    gn = next(o for o in g.ops if o.name == "native_group_norm")
    assert conv3.exchange_bytes == 1 * 2 * 4 * 24 * 2  # one padding row of the (2, 4, ., 24) fp16 input
    assert conv3.in_bytes == 2 * 4 * 16 * 24 * 2
    assert conv1.exchange_bytes == 0  # no padding: nothing crosses a patch boundary
    assert gn.exchange_bytes == 2 * 2 * 32 * 2  # mean and mean-square per (sample, group)
    assert gn.reduce_rows == 2 * 32 and conv3.reduce_rows == 0  # the statistics kernel's (sample, group) rows


def test_group_norm_statistics_run_at_a_per_row_rate() -> None:
    """A group norm forward over few (sample, group) rows costs its statistics pass at the per-row rate, far
    above the streaming price of its bytes; more rows (a larger batch) spread the same bytes faster."""
    from distscope.model.module_estimate import op_s
    from distscope.system.device import get_device

    dev = get_device("h200-sxm-141gb")

    def gn_s(batch: int) -> float:
        g = trace_module(lambda: nn.GroupNorm(32, 128), parse_inputs(f"x:{batch}x128x256x256:fp16:nchw"), "gn",
                         inference=True)
        return op_s(next(o for o in g.ops if o.reduce_rows), dev, g)

    one, sixteen = gn_s(1), gn_s(16)
    assert one > 5 * (3 * 128 * 256 * 256 * 2 / dev.hbm_Bps)  # 32 rows: latency-bound blocks, not HBM
    assert sixteen < 16 * one / 2  # 512 rows: the same bytes per row move at least twice as fast


def test_recompute_keeps_child_inputs_and_one_childs_saved_tensors() -> None:
    """Sequential(Linear, GELU, Linear) on x:32x256 bf16: each child keeps its input (the weights autograd
    also keeps are not activations); checkpointing every child keeps the three inputs plus, while a
    child's backward runs, its recomputed saved tensors: 16 + 64 + 64 KiB + 64 KiB, more than without."""
    from distscope.model.module_estimate import recompute_activation_bytes

    g = trace_module(_mlp, parse_inputs("x:32x256:bf16"), "mlp")
    kib = 1024
    assert g.saved_bytes == (16 + 64 + 64) * kib
    assert dict(g.child_inputs) == {"0": 16 * kib, "1": 64 * kib, "2": 64 * kib}
    assert recompute_activation_bytes(g) == (16 + 64 + 64 + 64) * kib


def test_recompute_reruns_the_childrens_forward_and_shrinks_resnet_activations(resnet) -> None:  # type: ignore[no-untyped-def]
    from distscope.model.module_estimate import op_s

    cluster = get_cluster("dgx-a100", 1)
    plain = estimate_module(resnet, cluster, dp=1, zero=0, global_batch=64)
    rc = estimate_module(resnet, cluster, dp=1, zero=0, global_batch=64, recompute=True)
    redo = sum(op_s(o, cluster.device, resnet) for o in resnet.ops if o.phase is Phase.FORWARD and o.module)
    assert rc.breakdown_s["recompute"] == pytest.approx(redo)
    assert rc.step_time_s == pytest.approx(plain.step_time_s + redo)  # GPU-bound: the host never waits
    assert rc.memory_bytes["activations"] < 0.5 * plain.memory_bytes["activations"]
    assert rc.flops_per_gpu == plain.flops_per_gpu  # MFU counts the model's FLOPs


def test_a_one_stage_pipeline_is_the_data_parallel_step(resnet) -> None:  # type: ignore[no-untyped-def]
    from distscope.model.module_pipeline import estimate_module_pipeline

    cluster = get_cluster("dgx-a100", 8)
    for zero in (0, 3):
        flat = estimate_module(resnet, cluster, dp=8, zero=zero, global_batch=1024)
        one = estimate_module_pipeline(resnet, cluster, pp=1, zero=zero, global_batch=1024)
        assert one.step_time_s == pytest.approx(flat.step_time_s, rel=1e-9)
        assert sum(one.memory_bytes.values()) == pytest.approx(sum(flat.memory_bytes.values()), rel=1e-9)


def test_pipeline_stages_split_the_children_and_pay_a_bubble(resnet) -> None:  # type: ignore[no-untyped-def]
    """pp 2 on 8 GPUs: 4 replicas, so 1024 / (64 x 4) = 4 micro-batches; the pipeline takes the longest
    path of 1F1B's graph with each stage's own forward and backward (for equal stages m·t_max + Σt −
    t_max), and its stages cover the children in order."""
    from distscope.model.module_estimate import child_costs
    from distscope.model.module_pipeline import estimate_module_pipeline, stage_split
    from distscope.model.schedules import StagePass, longest_path_s
    from distscope.plan import Schedule

    cluster = get_cluster("dgx-a100", 8)
    kids = child_costs(resnet, cluster.device)
    stages = stage_split(kids, 2)
    assert sum(stages, ()) == kids and all(stages)
    passes = [StagePass(f_s=sum(c.fwd_s for c in s), b_s=sum(c.bwd_s for c in s), w_s=0.0) for s in stages]
    t = [p.total_s for p in passes]
    est = estimate_module_pipeline(resnet, cluster, pp=2, zero=0, global_batch=1024)
    assert est.micro_batches == 4
    assert est.breakdown_s["compute"] == pytest.approx(4 * max(t))
    pipe = longest_path_s(Schedule.ONE_F_ONE_B, passes, 4, 0.0)
    assert est.breakdown_s["bubble"] == pytest.approx(pipe - 4 * max(t))
    assert 0 < est.breakdown_s["bubble"] <= 1.05 * (sum(t) - max(t))
    assert est.breakdown_s["pp"] > 0
    with pytest.raises(DistscopeError, match="--pp=3 must divide --gpus=8"):
        estimate_module_pipeline(resnet, cluster, pp=3, zero=0, global_batch=1024)


def test_ops_go_to_the_same_child_whatever_the_hash_seed() -> None:
    """In the backward torch's ModuleTracker can hold several top-level children at once (one whose
    inputs need no gradient is never left); the op goes to the most recently entered one, not to the
    first of a set, whose order changed with PYTHONHASHSEED and moved ResNet's pipeline split."""
    import os
    import subprocess

    code = ("import sys; sys.path.insert(0, 'examples/modules'); from resnet import resnet50; "
            "from distscope.workload.module_graph import parse_inputs, trace_module; "
            "g = trace_module(resnet50, parse_inputs('x:8x3x224x224:bf16'), 'r'); "
            "print(sorted((o.module, o.phase.value) for o in g.ops))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout for seed in ("0", "1", "7")}
    assert len(outs) == 1


def test_grouped_convolution_weight_gradient_costs_its_forward() -> None:
    """torch's flop formula prices a grouped convolution's weight gradient as ungrouped (32x the forward for
    32 groups of 4 channels); the graph counts each gradient at the forward's FLOPs (the input needs no
    gradient here: the weight's only), and keeps torch's count for an ungrouped convolution."""
    for groups in (32, 1):
        g = trace_module(lambda groups=groups: torch.nn.Conv2d(128, 128, 3, padding=1, groups=groups, bias=False),
                         parse_inputs("x:8x128x28x28:bf16"), "conv")
        fwd = 2 * 8 * 28 * 28 * 128 * (128 // groups) * 9
        assert g.flops(Phase.FORWARD) == fwd
        assert g.flops(Phase.BACKWARD) == fwd


def test_input_memory_format() -> None:
    """A fourth --input field names the memory format (channels_last, the default, or nchw); anything else is
    one line naming it and the choices."""
    from distscope.errors import DistscopeError
    from distscope.workload.module_graph import Layout

    (x,) = parse_inputs("x:8x3x224x224:tf32:nchw")
    assert x.layout is Layout.NCHW and x.text == "x:8x3x224x224:tf32:nchw"
    (y,) = parse_inputs("x:8x3x224x224:bf16")
    assert y.layout is Layout.CHANNELS_LAST and y.text == "x:8x3x224x224:bf16"
    with pytest.raises(DistscopeError, match="layout 'nhcw' is not one of channels_last, nchw"):
        parse_inputs("x:8x3x224x224:bf16:nhcw")


def test_nchw_prices_cudnn_layout_transforms_and_batch_norm() -> None:
    """An NCHW ResNet-50 in TF32 costs more than the channels-last one (layout transforms around the 3x3 and
    strided convolutions, cuDNN's NCHW batch norm); its 1x1 unit-stride convolutions are plain GEMMs with no
    transform; fp32 convolutions (CUDA cores) take none either."""
    from distscope.model.module_estimate import layout_transform_bytes, op_s
    from distscope.system.device import get_device
    from distscope.workload.module_graph import Layout

    dev = get_device("h100-sxm5-80gb")
    nchw = trace_module(resnet50, parse_inputs("x:32x3x224x224:tf32:nchw"), "resnet50")
    nhwc = trace_module(resnet50, parse_inputs("x:32x3x224x224:tf32"), "resnet50")
    assert nchw.layout is Layout.NCHW and nhwc.layout is Layout.CHANNELS_LAST
    t_nchw, t_nhwc = (sum(op_s(o, dev, g) for o in g.ops) for g in (nchw, nhwc))
    assert 1.15 < t_nchw / t_nhwc < 1.6
    convs = [o for o in nchw.ops if o.kind is OpKind.CONV]
    pointwise = [o for o in convs if o.pointwise]
    assert len(pointwise) == 2 * 33  # the bottlenecks' 32 and the first stage's projection, forward and backward
    assert all(layout_transform_bytes(o, nchw.dtype) == 0 for o in pointwise)
    assert all(layout_transform_bytes(o, nchw.dtype) > 0 for o in convs if not o.pointwise)
    fp32 = trace_module(resnet50, parse_inputs("x:32x3x224x224:fp32:nchw"), "resnet50")
    conv_s = [op_s(o, dev, fp32) for o in fp32.ops if o.kind is OpKind.CONV]
    fp32_nhwc = trace_module(resnet50, parse_inputs("x:32x3x224x224:fp32"), "resnet50")
    assert conv_s == [op_s(o, dev, fp32_nhwc) for o in fp32_nhwc.ops if o.kind is OpKind.CONV]


def test_trace_ref_remembers_a_trace_until_its_file_changes(tmp_path: Path) -> None:
    import os

    from distscope.workload.module_graph import trace_ref

    f = tmp_path / "m.py"
    f.write_text("from torch import nn\ndef make():\n    return nn.Linear(8, 4)\n")
    ref, inputs = f"torch:{f}:make", parse_inputs("x:2x8:fp32")
    first = trace_ref(ref, inputs)
    assert trace_ref(ref, inputs) is first
    f.write_text("from torch import nn\ndef make():\n    return nn.Linear(8, 16)\n")
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    again = trace_ref(ref, inputs)
    assert again is not first and again.params == 8 * 16 + 16
