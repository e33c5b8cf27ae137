"""torchtitan's per-op selective checkpointing (model/op_sac.py) and the frameworks' own loss memory
(model/framework_memory.py), derived by hand from the frameworks' code."""

from __future__ import annotations

import pytest

from distscope.dtypes import Precision
from distscope.model.framework_memory import FRAMEWORK_MEMORY
from distscope.model.memory import activation_bytes_per_layer
from distscope.model.op_sac import matmuls, recomputed
from distscope.plan import Framework, Plan, Recompute
from distscope.workload.catalog import get_model


def test_op_sac_keeps_what_torchtitans_policy_saves() -> None:
    """Llama 3 8B block, one token, bf16, no TP: torchtitan's per-op policy saves the block input and
    the outputs of wq, wv, w1, w2 (the 1st, 3rd, 5th, 7th matmul) and of attention (+ fp32 LSE); it
    recomputes wk, wo and w3. Derived by hand from the policy, not from the code under test."""
    spec = get_model("llama3-8b")
    h, q, kv, f, heads = 4096, 32 * 128, 8 * 128, 14336, 32
    want = 2 * (h + q + kv + f + h) + 2 * q + 4 * heads
    plan = Plan(dp=1, recompute=Recompute.SELECTIVE_OP, precision=Precision.BF16)
    assert activation_bytes_per_layer(spec, False, 1, 1, plan) == want
    assert recomputed(matmuls(spec, False, 1.0, 1)) == [(1.0, kv, h), (1.0, h, q), (1.0, f, h)]
    # it keeps less than Megatron's selective recompute (which keeps every GEMM input) and more than full
    sel, full = (activation_bytes_per_layer(spec, False, 1, 8192, Plan(dp=1, recompute=r))
                 for r in (Recompute.SELECTIVE, Recompute.FULL))
    assert full < activation_bytes_per_layer(spec, False, 1, 8192, plan) < sel


def test_framework_loss_memory() -> None:
    """torchtitan (Dec 2024): 12 fp32 bytes per logit at the loss's backward peak, 2 + 12 with the
    vocabulary split over TP; Megatron: e + 4 held and a 4-byte gradient at the peak (unchanged)."""
    tt, mg = FRAMEWORK_MEMORY[Framework.TORCHTITAN], FRAMEWORK_MEMORY[Framework.MEGATRON]
    assert tt.loss_bytes(1.0, 2.0, 1) == (0.0, 12.0)
    assert tt.loss_bytes(1.0, 2.0, 8) == (0.0, 14.0)
    assert mg.loss_bytes(1.0, 2.0, 1) == (6.0, 4.0) == mg.loss_bytes(1.0, 2.0, 8)
    assert FRAMEWORK_MEMORY[Framework.ANY] is mg
    assert mg.loss_bytes(1.0, 2.0, 8, fused=True) == tt.loss_bytes(1.0, 2.0, 8, fused=True) == (2.0, 0.0)


def test_head_input_memory() -> None:
    """The final norm's input (e·T·h/t under SP) plus the LM head's saved input: Megatron keeps the
    sequence shard and re-gathers it in backward, torchtitan's DTensor linear keeps the gathered T×h."""
    tt, mg = FRAMEWORK_MEMORY[Framework.TORCHTITAN], FRAMEWORK_MEMORY[Framework.MEGATRON]
    assert mg.head_input_bytes(8.0, 2.0, 8, True) == 2.0 * 2.0
    assert tt.head_input_bytes(8.0, 2.0, 8, True) == 2.0 + 16.0
    assert mg.head_input_bytes(8.0, 2.0, 8, False) == tt.head_input_bytes(8.0, 2.0, 8, False) == 32.0


def test_fused_cross_entropy_holds_the_logits_alone() -> None:
    """Megatron-Bridge's performance recipes run Transformer Engine's fused cross entropy: the last
    stage holds the bf16 logits (2 bytes each) instead of Megatron's 2 + 4 held and 4 at the peak. Its
    Qwen3-30B-A3B H100 FP8 recipe (PP2 VP24 EP8, micro-batch 2, no recompute, 16 GPUs) ran on 80 GB;
    with the 10-byte loss the same plan did not fit."""
    import dataclasses

    from distscope.model.estimate import estimate
    from distscope.plan import Dim, Schedule
    from distscope.scenario.build import build_cluster
    from distscope.scenario.flags import SystemFlags
    from distscope.software.presets import get_software
    from distscope.workload.training import TrainingShape

    spec = get_model("qwen3-30b-a3b")
    shape = TrainingShape(seq_len=4096, global_batch=512)
    plan = Plan(dp=8, pp=2, vp=24, ep=8, micro_batch=2, recompute=Recompute.NONE, precision=Precision.FP8_CURRENT,
                schedule=Schedule.INTERLEAVED,
                distributed_optimizer=True, overlap=frozenset({Dim.DP, Dim.PP}))
    cluster = build_cluster(SystemFlags(cluster="dgx-h100", gpus=16))
    mb = get_software("megatron-bridge-2025")
    assert mb.fused_cross_entropy
    fused = estimate(spec, shape, cluster, plan, software=mb)
    plain = estimate(spec, shape, cluster, plan, software=dataclasses.replace(mb, fused_cross_entropy=False))
    logits = 2 * 4096 * spec.vocab
    assert plain.memory.activations_bytes - fused.memory.activations_bytes == pytest.approx(logits * (10 - 2))
    assert fused.feasible and not plain.feasible
