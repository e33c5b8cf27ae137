"""Megatron-LM arguments for a hybrid of separate Mamba-2, attention and FFN blocks (Nemotron-H, Nemotron 3):
the model's block order as --hybrid-layer-pattern, cut into the plan's pipeline chunks (search/emit.py)."""

from __future__ import annotations

import dataclasses

import pytest

from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.model.stages import chunk_sizes
from distscope.plan import Recompute
from distscope.search.emit import hybrid_layer_pattern, megatron_args, megatron_env
from distscope.search.frameworks import Framework, pre_blackwell, restrict, unsupported
from distscope.search.megatron_check import check
from distscope.search.planner import search
from distscope.search.space import SearchSpace
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.spec import LinearMixer, MixerKind
from distscope.workload.training import TrainingShape

NANO = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"


def test_the_cut_keeps_the_order_and_puts_each_chunks_ffn_blocks_in_its_segment() -> None:
    sizes = (2, 2, 3, 2, 2, 2, 2, 2, 2, 2, 2)  # 23 FFN blocks over 11 chunks
    cut = hybrid_layer_pattern(NANO, sizes)
    segments = cut.split("|")
    assert cut.replace("|", "") == NANO and len(segments) == len(sizes)
    assert [sum(c in "-E" for c in seg) for seg in segments] == list(sizes)
    assert all(seg.endswith("E") for seg in segments[:-1])  # a cut follows an FFN block
    assert hybrid_layer_pattern(NANO, (23,)) == NANO  # one chunk: no pipe
    with pytest.raises(ValueError, match="do not cover"):
        hybrid_layer_pattern(NANO, (2, 2))


def test_trailing_mixers_stay_in_the_last_segment() -> None:
    assert hybrid_layer_pattern("M-M*-MM", (1, 1)) == "M-|M*-MM"


@pytest.mark.parametrize(("model", "gpus", "seq"), [("nemotron-3-nano-30b-a3b", 16, 4096), ("nemotron-h-8b", 16, 8192),
                                                    ("nemotron-3-super-120b-a12b", 64, 4096)])
def test_the_top_plans_arguments_match_what_was_estimated(model: str, gpus: int, seq: int) -> None:
    spec, shape = get_model(model), TrainingShape(seq_len=seq, global_batch=256)
    c = get_cluster("dgx-h100", gpus)
    res = search(spec, shape, c, restrict(Framework.MEGATRON, SearchSpace(precision=Precision.BF16), c.device), top_k=3)
    for cand in res.top:
        plan = cand.plan
        args = megatron_args(plan, spec, shape)
        pb = pre_blackwell(c.device)
        assert check(args, megatron_env(plan, pb), pb) == [], args
        pattern = args[args.index("--hybrid-layer-pattern") + 1]
        assert "--num-layers" not in args and "--pipeline-model-parallel-layout" not in args
        segments = pattern.split("|")
        assert pattern.replace("|", "") == spec.linear_mixer.pattern
        assert len(segments) == (plan.pp * plan.vp if plan.pp > 1 else 1)  # Megatron's VPP = segments / pp
        sizes = chunk_sizes(spec.layers, plan.pp, plan.vp, plan.stage_layers)
        if plan.pp > 1:
            assert [sum(ch in "-E" for ch in seg) for seg in segments] == list(sizes)


def test_the_check_rejects_what_megatron_rejects_for_a_hybrid() -> None:
    ok = ["--pipeline-model-parallel-size", "2", "--hybrid-layer-pattern", "M-M*-|M-M-"]
    assert check(ok, {}, False) == []
    problems = [
        (["--pipeline-model-parallel-size", "2", "--hybrid-layer-pattern", "M-|M*-|M-"], "not a multiple of pp=2"),
        ([*ok, "--pipeline-model-parallel-layout", "Et|tL"], "should not be used"),
        ([*ok, "--num-layers-per-virtual-pipeline-stage", "2"], "should not be used"),
        ([*ok, "--account-for-loss-in-pipeline-split"], "should not be used"),
        ([*ok, "--decoder-first-pipeline-num-layers", "3"], "decoder-first/last"),
        ([*ok, "--num-layers", "8"], "not the pattern's 9 layers"),
        (["--hybrid-layer-pattern", "M-X-"], "needs one or more of"),
        (["--hybrid-layer-pattern", "M-||M-"], "needs one or more of"),
        (["--pipeline-model-parallel-size", "2", "--hybrid-layer-pattern", "M-M*-"], "must divide by pp=2"),
        (["--hybrid-layer-pattern", "M*+-"], "Attention and MLA/DSA"),
    ]
    for args, says in problems:
        assert any(says in p for p in check(args, {}, False)), (args, check(args, {}, False))


def test_what_it_cannot_emit_is_refused_in_words() -> None:
    spec, c = get_model("nemotron-3-nano-30b-a3b"), get_cluster("dgx-h100", 16)
    shape = TrainingShape(seq_len=4096, global_batch=256)
    plan = search(spec, shape, c, restrict(Framework.MEGATRON, SearchSpace(precision=Precision.BF16), c.device),
                  top_k=1).best.plan
    assert unsupported(Framework.MEGATRON, plan, spec, c.device) == []
    block = dataclasses.replace(plan, recompute=Recompute.FULL, recompute_layers=1)
    assert any("block recompute of a hybrid" in p for p in unsupported(Framework.MEGATRON, block, spec, c.device))
    overlap = dataclasses.replace(plan, moe_a2a_overlap=True)
    assert any("build_schedule_plan" in p for p in unsupported(Framework.MEGATRON, overlap, spec, c.device))
    mtp = dataclasses.replace(spec, mtp_layers=1)
    assert any("MTP block pattern" in p for p in unsupported(Framework.MEGATRON, plan, mtp, c.device))
    assert spec.linear_mixer is not None
    unordered = dataclasses.replace(spec, linear_mixer=dataclasses.replace(spec.linear_mixer, pattern=""))
    assert any("block order" in p for p in unsupported(Framework.MEGATRON, plan, unordered, c.device))


def test_a_pattern_that_disagrees_with_the_counts_is_refused() -> None:
    base = dict(kind=MixerKind.MAMBA2, layers=2, attention_layers=1, heads=8, head_dim=64, key_heads=1, key_dim=64,
                separate_blocks=True)
    assert LinearMixer(**base, pattern="M-M*-").pattern == "M-M*-"
    with pytest.raises(DistscopeError, match="has 1 'M' blocks"):
        LinearMixer(**base, pattern="M-*-")
    with pytest.raises(DistscopeError, match="one of"):
        LinearMixer(**base, pattern="M-M*X")
    with pytest.raises(DistscopeError, match="separate Mamba-2"):
        LinearMixer(**{**base, "separate_blocks": False}, pattern="M-M*-")
    spec = get_model("nemotron-h-8b")
    assert spec.linear_mixer is not None
    with pytest.raises(DistscopeError, match=r"24 MLP \('-'\) blocks, the model 0 and 23"):
        dataclasses.replace(spec, layers=23)
