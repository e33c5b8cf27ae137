"""torchtitan's per-op selective activation checkpointing (Recompute.SELECTIVE_OP): what a block keeps
between its forward and its backward, and what it recomputes.

torchtitan wraps every transformer block in a checkpoint whose policy saves the outputs of a list of
ops and recomputes everything else in backward (torchtitan/distributed/activation_checkpoint.py,
`SelectiveAC`; the same rule as `selective_ac_option = "op"` of torchtitan@9dec370 (Dec 2024),
torchtitan/parallelisms/parallelize_llama.py `_apply_ac_to_transformer_block`). Per block:
- the block input (the checkpoint's own input): e·T·h, T/tp tokens under sequence parallelism;
- matmuls: the k-th matmul of the block in forward order (k = 1, 2, ...; the counter is created per
  checkpointed call) is saved when k is odd and recomputed when k is even ("saves output of all
  compute ops, except every second mm"); the MoE router gate is force-recomputed and not counted;
- scaled-dot-product attention: its output e·T·a_l·d_v and its fp32 log-sum-exp 4·T·a_l;
- reduce-scatter outputs (tensor parallelism with sequence parallelism: after wo and w2), and
  all-to-all outputs (expert parallelism: dispatch and combine);
- recomputed in backward: norms, RoPE, activation functions, every second matmul and the TP
  all-gathers in front of the attention and the FFN.
Matmuls in torchtitan's module order (models/llama3/model.py; deepseek_v3 for MLA and MoE): wq, wk, wv,
wo (MLA: wq or wq_a, wq_b; wkv_a, wkv_b; wo), then w1, w3 (SwiGLU only), w2; a MoE layer runs the
routed experts' w1, w3, w2 (grouped GEMMs, counted like matmuls: an approximation) and then the shared
experts'. A rowwise-parallel matmul's output (wo, w2) is the full T×h partial sum before its
reduce-scatter. Under FP8 the same rule is applied to the FP8 GEMMs (an assumption: torchao's
Float8Linear calls `_scaled_mm`, not `mm`; the published FP8 runs are all compiled).
"""

from __future__ import annotations

from distscope.workload.spec import FfnKind, ModelSpec

Gemm = tuple[float, float, float]  # (M, N, K): output M×N


def matmuls(spec: ModelSpec, moe_layer: bool, T: float, tp: int, M_e: float = 0.0, fe_e: float = 0.0) -> list[Gemm]:
    """The block's matmuls in torchtitan's forward order, per GPU. T tokens (all of them: under
    sequence parallelism the inputs are all-gathered first); M_e routed tokens of width fe_e per
    expert GEMM on this rank (MoE)."""
    h = spec.hidden
    a_l = spec.heads // tp
    g_l = max(spec.kv_heads // tp, 1)
    out: list[Gemm] = []
    if spec.mla is not None:
        m = spec.mla
        d_qk, d_v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        if m.q_lora_rank:
            out += [(T, m.q_lora_rank, h), (T, a_l * d_qk, m.q_lora_rank)]
        else:
            out.append((T, a_l * d_qk, h))
        out += [(T, m.kv_lora_rank + m.qk_rope_head_dim, h), (T, a_l * (m.qk_nope_head_dim + d_v), m.kv_lora_rank),
                (T, h, a_l * d_v)]
    else:
        d = spec.dhead
        q = 2 * a_l if spec.attention_gate else a_l  # the output gate's half of wq
        out += [(T, q * d, h), (T, g_l * d, h), (T, g_l * d, h), (T, h, a_l * d)]

    def ffn(rows: float, width: float, inp: float = h) -> list[Gemm]:
        up = [(rows, width, inp)] * (2 if spec.ffn is FfnKind.SWIGLU else 1)
        return [*up, (rows, inp, width)]

    if moe_layer:
        assert spec.moe is not None
        if spec.moe.latent:
            out += [(T, spec.moe.latent, h), (T, h, spec.moe.latent)]
        out += ffn(M_e, fe_e, spec.expert_width)
        if spec.moe.shared_experts:
            out += ffn(T, spec.moe.expert_ffn_hidden * spec.moe.shared_experts / tp)
    else:
        out += ffn(T, spec.ffn_hidden / tp)
    return out


def recomputed(gemms: list[Gemm]) -> list[Gemm]:
    """The matmuls recomputed in backward: the 2nd, 4th, ... of the block."""
    return gemms[1::2]


def saved_bytes(spec: ModelSpec, moe_layer: bool, T: float, tp: int, sp: bool, e: float, *, ep: int = 1,
                M_e: float = 0.0, fe_e: float = 0.0) -> float:
    """Bytes one block keeps for its backward under per-op selective checkpointing (module docstring);
    e = bytes of the activation dtype (matmul and attention outputs are in it)."""
    h = spec.hidden
    a_l = spec.heads // tp
    d_v = spec.mla.v_head_dim if spec.mla is not None else spec.dhead
    r = 1.0 / tp if sp else 1.0
    out = e * T * h * r  # block input
    out += sum(e * M * N for M, N, _ in matmuls(spec, moe_layer, T, tp, M_e, fe_e)[0::2])
    out += e * T * a_l * d_v + 4.0 * T * a_l  # attention output, fp32 log-sum-exp
    if sp and tp > 1:
        out += 2 * e * T * h / tp  # reduce-scatter outputs after wo and w2
    if moe_layer and ep > 1:
        assert spec.moe is not None
        out += 2 * e * T * r * spec.moe.top_k * spec.expert_width  # all-to-all dispatch and combine outputs
    return out
