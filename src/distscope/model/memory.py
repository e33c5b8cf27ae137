"""Memory per GPU: weights, gradients, optimizer state, activations, workspace.

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO §3): model weights in the training dtype
(2 bytes), fp32 main gradients (Megatron's main_grad buffer, `grad_reduce_dtype`), fp32 master
weights + Adam m and v (12 bytes). ZeRO-1 / distributed optimizer shard the 12 bytes over the
data-parallel group, ZeRO-2 also the gradients, ZeRO-3 also the weights.

Activations per layer per micro-batch follow Korthikanti et al. 2022 (Table 2), generalised to any
dtype e, GQA, FFN width and activation kind (for e=2, MHA, f=4h this is exactly their
sbh(10 + 24/t + 5as/(ht)) without SP, and sbh/t·(34 + 5as/h) with SP):
  norm inputs 2e·T·h·r, QKV input e·T·h·r, Q,K e·T·(a_l+g_l)·d, V e·T·g_l·d, proj input e·T·a_l·d,
  dropout masks T·h·r each (GPT style), FC1 input e·T·h·r, activation in/out e·T·f_l·(up+1),
  unfused attention a_l·s·(2e+1) per token (softmax out, dropout mask, dropout out),
  fused attention 4·a_l per token (fp32 log-sum-exp)
with T = b·s/cp tokens, r = 1/t under sequence parallelism (else 1). Selective recompute drops the
s² terms; full recompute keeps only the layer input e·T·h·r; torchtitan's per-op selective
checkpointing keeps what model/op_sac.py lists. Under FP8 Transformer Engine saves
the FP8 cast of each GEMM input (1 byte) instead of the bf16 tensor. In-flight micro-batches per pipeline
rank and schedule: model/schedules.py (inflight_sets).
"""

from __future__ import annotations

import dataclasses
import functools

from distscope.model import compressed_attention, linear_mixer, op_sac, sparse_attention
from distscope.model.routing import routed_load
from distscope.plan import Plan, Recompute
from distscope.workload.spec import FfnKind, ModelSpec

WORKSPACE_BYTES = 2.0 * 2**30  # CUDA context, NCCL buffers, cuBLAS workspace, allocator slack


@dataclasses.dataclass(frozen=True, slots=True)
class Memory:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    workspace_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes + self.workspace_bytes

    def terms(self) -> dict[str, float]:
        return {
            "weights": self.weights_bytes, "grads": self.grads_bytes, "optimizer": self.optimizer_bytes,
            "activations": self.activations_bytes, "workspace": self.workspace_bytes,
        }

    def biggest(self) -> str:
        t = self.terms()
        return max(t, key=lambda k: t[k])


@functools.lru_cache(maxsize=8192)  # pure; asked once per stage kind of an estimate (the plan's hash is cached)
def activation_bytes_per_layer(spec: ModelSpec, moe_layer: bool, b: int, s: int, plan: Plan,
                               recompute: Recompute | None = None) -> float:
    """Activations one layer keeps for its backward per micro-batch, under `recompute` (default: the
    plan's)."""
    rc = plan.recompute if recompute is None else recompute
    e = plan.precision.activation_dtype.bytes
    tp = plan.tp
    T = b * s / plan.cp
    r = 1.0 / tp if plan.sp else 1.0
    h = spec.hidden
    if rc is Recompute.FULL:  # each block's input (a hybrid of separate blocks checkpoints each: spec.blocks)
        per_layer = e * T * h * r * spec.residual_streams  # mHC: the n-stream residual
        return per_layer if spec.blocks == spec.layers else per_layer * spec.blocks / spec.layers
    if rc is Recompute.SELECTIVE_OP:  # torchtitan's per-op checkpointing: transformers only (model/refusal.py)
        M_e = fe_e = 0.0
        if moe_layer:
            assert spec.moe is not None
            M_e = (T * plan.expert_tp / tp if plan.sp else T) * spec.moe.top_k * routed_load(spec, plan, T)
            fe_e = spec.moe.expert_ffn_hidden / plan.expert_tp
        return op_sac.saved_bytes(spec, moe_layer, T, tp, plan.sp, e, ep=plan.ep, M_e=M_e, fe_e=fe_e)
    attn, mix, ffn = _saved_parts(spec, moe_layer, T, s, plan, rc)
    # mHC: each block keeps its n-stream input (hc_pre's coefficients and hc_post's mix) and its branch output
    # (hc_post's gradient) where a plain residual add keeps nothing
    n = spec.residual_streams
    hc = 0.0 if n == 1 else 2 * (n + 1) * e * T * h * r
    return spec.attention_share * attn + spec.linear_share * mix + ffn + hc  # a transformer: a = 1, m = 0


def _saved_parts(spec: ModelSpec, moe_layer: bool, T: float, s: int, plan: Plan,
                 rc: Recompute) -> tuple[float, float, float]:
    """What an attention mixer, a linear mixer (model/linear_mixer.py) and the FFN block keep, each with
    its norm's input and its first GEMM's input (module docstring); a layer holds one of each unless a
    hybrid (layer = attention_share·attention + linear_share·linear + FFN)."""
    e = plan.precision.activation_dtype.bytes
    tp = plan.tp
    r = 1.0 / tp if plan.sp else 1.0
    h = spec.hidden
    gi = plan.precision.gemm_dtype.bytes  # bytes of a saved GEMM input
    a_l = spec.heads / tp
    g_l = max(spec.kv_heads // tp, 1)
    d = spec.dhead
    mask = 1.0 if spec.bias else 0.0
    up = 2 if spec.ffn is FfnKind.SWIGLU else 1
    if moe_layer:
        assert spec.moe is not None
        # routed experts see M_e permuted tokens of width f_e/etp on this rank (model/layer.py): with
        # sequence parallelism and etp < tp a rank dispatches only its T/tp tokens, so its experts hold
        # T·k·etp/tp of them, not T·k; shared experts are TP-sharded like a dense FFN
        M_e = (T * plan.expert_tp / tp if plan.sp else T) * spec.moe.top_k * routed_load(spec, plan, T)
        fe_e = spec.moe.expert_ffn_hidden / plan.expert_tp
        ffn = M_e * (gi * spec.expert_width + fe_e * (e * up + gi))
        ffn += T * spec.moe.expert_ffn_hidden / tp * (e * up + gi) * spec.moe.shared_experts
        ffn += T * r * gi * (h + spec.moe.latent) if spec.moe.latent else 0.0  # the latent projections' inputs
    else:
        ffn = T * (spec.ffn_hidden / tp) * (e * up + gi)
    q_l = 2 * a_l if spec.attention_gate else a_l  # the output gate's half of q_proj is kept too
    block_in = T * h * r * (e + gi)  # a block's norm input and its first GEMM's input
    if plan.attention.fused or spec.compressed_attention is not None or spec.sparse_attention is not None:
        # DeepSeek-V4 and DSA run their own fused sparse kernels
        core = 4.0 * T * a_l
    elif rc is Recompute.SELECTIVE:
        core = 0.0
    else:
        core = T * a_l * s * ((2 * e + 1) if mask else e)
    attn = block_in + T * h * r * mask + e * T * (q_l + 2 * g_l) * d + gi * T * a_l * d + core
    if (ca := spec.compressed_attention) is not None:
        attn += compressed_attention.activation_bytes(spec, ca, T, e, gi)
    if (sa := spec.sparse_attention) is not None:
        assert spec.mla is not None
        attn += sparse_attention.activation_bytes(sa, spec.mla, spec.layers, T, plan.cp, s, a_l, d, e)
    lm = spec.linear_mixer
    mix = 0.0 if lm is None else block_in + linear_mixer.activation_bytes(lm, T, tp, e, gi)
    return attn, mix, block_in + T * h * r * mask + ffn


def wgrad_input_bytes_per_layer(spec: ModelSpec, moe_layer: bool, b: int, s: int, plan: Plan) -> float:
    """Activations a layer keeps between its input-gradient pass (B) and its weight-gradient pass (W)
    when a zero-bubble schedule defers W (Qi et al. 2023, sec. 2.1 and Table 1: W needs only the
    inputs of the linear layers): QKV and FC1 inputs gi·T·h·r each, the projection input gi·T·a_l·d,
    the FC2 input gi·T·f_l; a MoE layer's routed experts keep their own inputs, gi·M_e·(h + f_e/etp) over
    the M_e tokens dispatched to them (activation_bytes_per_layer), and its shared experts gi·T·f_e/tp."""
    gi = plan.precision.gemm_dtype.bytes
    tp = plan.tp
    T = b * s / plan.cp
    r = 1.0 / tp if plan.sp else 1.0
    a, m = spec.attention_share, spec.linear_share  # a hybrid's mixers (LinearMixer): in_proj and out_proj inputs
    width = spec.linear_mixer.width / tp if spec.linear_mixer is not None else 0.0
    lin = gi * T * ((1 + a + m) * spec.hidden * r + a * spec.heads / tp * spec.dhead + m * width)
    if moe_layer:
        assert spec.moe is not None
        moe = spec.moe
        M_e = (T * plan.expert_tp / tp if plan.sp else T) * moe.top_k * routed_load(spec, plan, T)
        routed = gi * M_e * (spec.expert_width + moe.expert_ffn_hidden / plan.expert_tp)
        routed += gi * T * r * (spec.hidden + moe.latent) if moe.latent else 0.0  # the latent projections' inputs
        return lin + routed + gi * T * moe.shared_experts * moe.expert_ffn_hidden / tp
    return lin + gi * T * spec.ffn_hidden / tp
