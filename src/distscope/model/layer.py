"""Per-layer work of one transformer layer for one micro-batch on one GPU: GEMMs, attention core and
element-wise HBM traffic, and their times on a device.

Shapes (T = b·s/cp tokens on this GPU; a_l = a/tp heads, g_l = max(g/tp, 1) kv heads, f_l = f/tp):
  QKV   (T, (a_l + 2·g_l)·d, h)          out proj (T, h, a_l·d)
  FFN   fc1 (T, f_l·(2 if SwiGLU else 1), h), fc2 (T, h, f_l)
  MoE   router (T, E, h); routed experts as one grouped GEMM over M_e = T_d·k·c·(etp with SP) tokens of
        width f_e/etp (T_d = T/tp with SP, else T; c the busiest EP rank's share over the balanced one,
        model/routing.py); shared experts like FFN. Per-rank expert FLOPs are T·k·c·f_e/tp for
        any etp with SP: etp only reshapes the GEMM (Megatron's expert tensor parallelism).
  core  QKᵀ 2·b·a_l·(s/cp)·s·d_qk and AV 2·b·a_l·(s/cp)·s·d_v FLOPs (full s² as in Megatron's FLOP
        formulas; fused causal attention skips the masked half)
Element-wise bytes per token (e = activation bytes; counted like Korthikanti et al. 2022's activation
inventory, with each kernel reading its inputs and writing its outputs once): norms 2·2he,
bias-dropout-add 2·(3e+1)h, activation 2f_l·e (3f_l·e SwiGLU), unfused softmax+dropout a_l·s·(4e+1).
Norm/dropout/residual tokens are T/tp with sequence parallelism, else T (replicated on TP ranks).
Backward costs 2x forward for GEMMs and element-wise kernels; fused attention backward 2.5x forward
(FlashAttention-2: five matmuls against two).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math

from distscope.dtypes import DType, Precision, Scaling
from distscope.model import compressed_attention, fp8, kernel_data, linear_mixer, op_sac, sparse_attention
from distscope.model import efficiency as eff
from distscope.model.host import HostWork
from distscope.plan import AttentionImpl, Recompute
from distscope.system.device import Device
from distscope.workload.spec import CompressedKind, FfnKind, LocalAttention, LocalKind, ModelSpec, PositionKind


@dataclasses.dataclass(frozen=True, slots=True)
class LayerCost:
    fwd_s: float  # forward compute time
    bwd_s: float  # backward compute time
    recompute_s: float  # extra forward work in backward under the recompute mode
    gemm_fwd_s: float  # forward GEMM time (what TP communication can hide behind)
    attn_fwd_s: float  # forward attention-core time (what CP ring exchange can hide behind)
    model_flops: float  # forward + backward FLOPs, no recompute
    recompute_flops: float
    # the attention and element-wise part of fwd_s / bwd_s / recompute_s (no GEMMs, no FP8 casts)
    other_fwd_s: float = 0.0
    other_bwd_s: float = 0.0
    other_recompute_s: float = 0.0
    expert_fwd_s: float = 0.0  # forward time of the routed experts' GEMMs (part of gemm_fwd_s)

    def host_floored(self, host: HostWork) -> LayerCost:
        """The same layer when the host issues its kernels no faster than `host` allows (model/host.py):
        the forward is phased at the MoE sync, the backward bounded by the host's total; a recomputed
        forward takes the forward's share of the delay."""
        fwd = host.forward_pass_s(self.expert_fwd_s, self.fwd_s - self.expert_fwd_s)
        rec = self.recompute_s * fwd / self.fwd_s if self.fwd_s > 0 else 0.0
        return dataclasses.replace(self, fwd_s=fwd, bwd_s=max(self.bwd_s, host.backward_s()), recompute_s=rec)

    def slowed(self, speed: float) -> LayerCost:
        """The same work on a stack whose attention and element-wise kernels run at `speed` times the
        fused stack's speed. GEMMs are cuBLAS in both, so their time stays; FP8 casts stay too (TE fuses
        them into its kernels, torch.compile into the neighbouring Inductor kernels)."""
        k = 1.0 / speed - 1.0
        return dataclasses.replace(
            self, fwd_s=self.fwd_s + self.other_fwd_s * k, bwd_s=self.bwd_s + self.other_bwd_s * k,
            recompute_s=self.recompute_s + self.other_recompute_s * k, attn_fwd_s=self.attn_fwd_s * (1 + k),
            other_fwd_s=self.other_fwd_s * (1 + k), other_bwd_s=self.other_bwd_s * (1 + k),
            other_recompute_s=self.other_recompute_s * (1 + k))


class Mixer(enum.Enum):
    """The token mixer a layer's cost is priced with (layer_cost blends them for hybrid models)."""

    ATTENTION = "attention"
    LINEAR = "linear"  # the spec's LinearMixer (model/linear_mixer.py)
    NONE = "none"  # an FFN block alone
    # DeepSeek-V4's attention layers (spec.compressed_attention, model/compressed_attention.py)
    SLIDING = CompressedKind.SLIDING.value
    SPARSE = CompressedKind.SPARSE.value
    HEAVY = CompressedKind.HEAVY.value

    @property
    def compressed(self) -> CompressedKind | None:
        return CompressedKind(self.value) if self.value in _COMPRESSED else None


_COMPRESSED = {k.value for k in CompressedKind}


@functools.lru_cache(maxsize=65536)
def layer_cost(spec: ModelSpec, moe_layer: bool, b: int, s: int, tp: int, cp: int, sp: bool,
               attention: AttentionImpl, recompute: Recompute, precision: Precision, device: Device,
               etp: int = 0, routed_frac: float = 1.0, fp8_attention: bool = False,
               scaling: Scaling = Scaling.NONE, ep: int = 0) -> LayerCost:
    """One layer (`_mixer_layer_cost`). A hybrid model (spec.linear_mixer) has a attention mixers and m
    linear ones per layer (spec.attention_share, spec.linear_share), so its mean layer is
        a·C(attention + FFN) + m·C(linear + FFN) + (1 − a − m)·C(FFN)
    (every LayerCost term is a sum over kernels, so the blend is exact for the mean; 1 − a − m < 0 when
    blocks hold one mixer or one FFN each and mixers outnumber FFNs, as in Nemotron-H)."""
    args = (spec, moe_layer, b, s, tp, cp, sp, attention, recompute, precision, device, etp, routed_frac,
            fp8_attention, scaling, ep)
    if spec.compressed_attention is not None:  # DeepSeek-V4: the mean over its three attention kinds
        parts = tuple((w, Mixer(kind.value)) for w, kind in compressed_attention.shares(spec))
    elif spec.linear_mixer is None:
        return _mixer_layer_cost(*args, Mixer.ATTENTION)
    else:
        a, m = spec.attention_share, spec.linear_share
        parts = ((a, Mixer.ATTENTION), (m, Mixer.LINEAR), (1.0 - a - m, Mixer.NONE))
    costs = [(w, _mixer_layer_cost(*args, mixer)) for w, mixer in parts if w != 0.0]
    return LayerCost(**{f.name: sum(w * getattr(c, f.name) for w, c in costs) for f in dataclasses.fields(LayerCost)})


def _mixer_layer_cost(spec: ModelSpec, moe_layer: bool, b: int, s: int, tp: int, cp: int, sp: bool,
                      attention: AttentionImpl, recompute: Recompute, precision: Precision, device: Device,
                      etp: int, routed_frac: float, fp8_attention: bool, scaling: Scaling, ep: int,
                      mixer: Mixer) -> LayerCost:
    """`mixer`: the layer's token mixer (the FFN or MoE block is the same under each). `etp` is the expert
    tensor-parallel degree (0 = tp); `routed_frac` the routed tokens the busiest
    expert-parallel rank processes over the balanced share (model/routing.routed_load: the routing
    imbalance, capped by a capacity factor; below 1 tokens are dropped). Under a low-precision recipe the linear
    layers run FP8/FP4 GEMMs with Transformer Engine's quantization passes for `scaling` (model/fp8.py,
    resolved from the precision and the stack); attention stays in the activation dtype unless
    `fp8_attention`. `ep`: the expert-parallel degree; the routed experts' grouped GEMM runs as one GEMM
    per local expert (experts / ep of them, each on its share of the routed tokens: TE GroupedLinear
    launches a GEMM per expert), so each pays its own weight read and fixed kernel cost. 0 prices them
    as one GEMM (the planner's lower bound). DeepGEMM's grouped contiguous-layout benchmarks (H800 FP8:
    4 x 8192 and 8 x 4096 rows per group at 1,297 / 1,288 TFLOPS against 1,304 for one 4096-row GEMM of
    the same N, K) put a training-sized expert GEMM on the dense curve, which data/kernels/grouped_gemm.csv
    and tests/core/test_grouped_gemm.py check."""
    gemm_dtype = precision.gemm_dtype
    act_dtype = precision.activation_dtype
    e = act_dtype.bytes

    h, a, g = spec.hidden, spec.heads, spec.kv_heads
    a_l = a // tp
    g_l = max(g // tp, 1)
    s_q = s // cp
    T = b * s_q
    T_el = T // tp if sp else T
    # linear layers (M, N, K, input comes from a norm/activation TE fuses the FP8 cast into)
    gemms: list[fp8.Linear] = []
    wgrad_only: range = range(0)  # indices in `gemms` of linears whose input gets no gradient (DSA's indexer)
    router: list[tuple[float, float, float]] = []  # GEMMs that stay in the activation dtype
    ca, kind = spec.compressed_attention, mixer.compressed
    if mixer is Mixer.LINEAR:
        assert spec.linear_mixer is not None
        gemms += linear_mixer.gemms(spec.linear_mixer, T, h, tp)
        d_qk = d_v = spec.dhead
    elif kind is not None:
        assert ca is not None
        d_qk = d_v = spec.dhead
        gemms += compressed_attention.gemms(ca, kind, T, h, a_l, d_qk)
    elif mixer is Mixer.NONE:
        d_qk = d_v = spec.dhead
    elif spec.mla is not None:
        m = spec.mla
        d_qk, d_v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        gemms += [(T, m.q_lora_rank, h, True), (T, a_l * d_qk, m.q_lora_rank, True),
                  (T, m.kv_lora_rank + m.qk_rope_head_dim, h, True),
                  (T, a_l * (m.qk_nope_head_dim + d_v), m.kv_lora_rank, True), (T, h, a_l * d_v, False)]
        if spec.sparse_attention is not None:  # DSA's lightning indexer (model/sparse_attention.py)
            wgrad_only = range(len(gemms), len(gemms) + 3)
            gemms += sparse_attention.gemms(spec.sparse_attention, spec, T)
    else:
        d_qk = d_v = spec.dhead
        q_l = 2 * a_l if spec.attention_gate else a_l  # the output gate doubles q_proj (params.py)
        gemms += [(T, (q_l + 2 * g_l) * d_qk, h, True), (T, h, a_l * d_v, False)]
    act_mult = 3 if spec.ffn is FfnKind.SWIGLU else 2
    up = 2 if spec.ffn is FfnKind.SWIGLU else 1
    M_e = fe_e = 0.0  # routed tokens and expert width on this rank (MoE layers)
    routed_at: tuple[int, ...] = ()  # indices in `gemms` of the routed experts' grouped GEMMs
    local = 1  # experts per rank
    if moe_layer:
        assert spec.moe is not None
        fe = spec.moe.expert_ffn_hidden // tp
        k = spec.moe.top_k
        et = etp or tp
        M_e = (T * et / tp if sp else T) * k * routed_frac  # routed tokens this rank's experts see
        fe_e = spec.moe.expert_ffn_hidden // et
        router.append((T, spec.moe.experts, h))
        if spec.moe.latent:  # LatentMoE's projections around dispatch and combine, on the rank's own tokens
            gemms += [(T_el, spec.moe.latent, h, False), (T_el, h, spec.moe.latent, False)]
        w = spec.expert_width
        routed_at = (len(gemms), len(gemms) + 1)
        local = max(1, spec.moe.experts // ep) if ep else 1
        gemms += [(M_e, fe_e * up, w, False), (M_e, w, fe_e, False)]  # TE GroupedLinear on permuted tokens
        if spec.moe.shared_experts:
            fs = fe * spec.moe.shared_experts
            gemms += [(T, fs * up, h, False), (T, h, fs, True)]
        act_bytes = act_mult * e * (M_e * fe_e + T * fe * spec.moe.shared_experts)
        act_bytes += 4 * T * k * routed_frac * w * e  # token permute / unpermute (read + write each)
    else:
        f_l = spec.ffn_hidden // tp
        gemms += [(T, f_l * up, h, True), (T, h, f_l, True)]  # LayerNormMLP: norm and activation fuse the cast
        act_bytes = act_mult * e * T * f_l

    sc = (fp8.resolve(precision, False) if scaling is Scaling.NONE else scaling) if precision.low_precision else Scaling.NONE
    rate = kernel_data.scaled_gemm_factor(device.name, sc)  # block-scaled GEMMs over per-tensor ones
    gemm_fwd_s = expert_fwd_s = no_dgrad_s = no_dgrad_flops = 0.0
    for i, (M, N, K, _) in enumerate(gemms):
        per = local if i in routed_at else 1  # a grouped GEMM: one GEMM per local expert
        t = per * eff.gemm_s(device, gemm_dtype, M / per, N, K) / rate
        gemm_fwd_s += t
        expert_fwd_s += t if i in routed_at else 0.0
        if i in wgrad_only:  # inputs detached: the backward computes the weight gradient alone
            no_dgrad_s, no_dgrad_flops = no_dgrad_s + t, no_dgrad_flops + 2.0 * M * N * K
    gemm_fwd_s += sum(eff.gemm_s(device, act_dtype, M, N, K) for M, N, K in router)
    cast_fwd_s = cast_bwd_s = 0.0
    if precision.low_precision:  # FP8/FP4 GEMMs: Transformer Engine's casts (model/fp8.py), per micro-batch
        f = gemm_dtype.bytes
        nt = device.fp8_non_tn
        cast_fwd_s = eff.elementwise_s(device, fp8.input_cast_bytes(gemms, e, f, sc, nt), len(gemms))
        cast_bwd_s = eff.elementwise_s(device, fp8.grad_cast_bytes(gemms, e, f, sc, nt), len(gemms))
    # FLOPs count the routed tokens an average rank processes (min(1, routed_frac)): the busiest rank's
    # excess (routed_frac > 1, model/routing.py) costs it time, not useful work
    useful = min(1.0, routed_frac) / routed_frac
    gemm_flops = (sum(2.0 * M * N * K * (useful if i in routed_at else 1.0) for i, (M, N, K, _) in enumerate(gemms))
                  + sum(2.0 * M * N * K for M, N, K in router))

    core_flops = 2.0 * b * a_l * s_q * s * (d_qk + d_v) if mixer is Mixer.ATTENTION else 0.0
    dropout = spec.bias  # GPT/BLOOM-style models train with dropout; Llama-style do not
    blocks = 1 if mixer is Mixer.NONE else 2  # a norm and a residual add per block, mixer and FFN
    el_bytes = T_el * h * blocks * (2 * e + ((3 * e + 1) if dropout else 3 * e)) + act_bytes
    el_bytes += blocks * compressed_attention.hyper_connection_bytes(spec.residual_streams, T_el, h, e)
    if spec.position is PositionKind.ROPE and mixer is Mixer.ATTENTION:  # (DeepSeek-V4's partial RoPE: elementwise_bytes)
        el_bytes += 2 * T * (a_l + g_l) * d_qk * e
    if spec.attention_gate and mixer is Mixer.ATTENTION:  # sigmoid(gate) · output: read both, write one
        el_bytes += 3 * T * a_l * d_v * e
    attn_dtype = gemm_dtype if fp8_attention else act_dtype
    bwd_flops_offset = 0.0  # backward FLOPs beyond twice the forward's (DSA's forward-only indexer scores)
    band = spec.local_attention if spec.local_attention is not None and s > spec.local_attention.size else None
    share = band.layers / spec.layers if band is not None else 0.0  # the layer cost is the mean over the layers
    if band is not None:  # its layers' share of the model FLOPs counts the keys their queries attend to
        core_flops *= 1.0 - share * (1.0 - band.keys_per_query(s) / ((s + 1) / 2))
    if kind is not None:  # DeepSeek-V4's fused sparse kernels whatever the plan's attention implementation
        assert ca is not None
        core_flops = (compressed_attention.core_flops(ca, kind, b, s_q, s, a_l, d_qk)
                      + compressed_attention.indexer_flops(ca, kind, T, s))
        attn_fwd_s, attn_bwd_s = compressed_attention.core_s(ca, kind, device, attn_dtype, gemm_dtype, b, s_q, s,
                                                             a_l, d_qk, attention.kernel or "cudnn")
        el_bytes += compressed_attention.elementwise_bytes(ca, kind, T, a_l, d_qk, e)
    elif (sa := spec.sparse_attention) is not None and mixer is Mixer.ATTENTION:
        assert spec.mla is not None  # DSA: its fused sparse kernels whatever the plan's attention implementation
        core_flops, bwd_flops_offset = sparse_attention.flops(sa, spec.mla, spec.layers, b, s_q, s, a_l)
        attn_fwd_s, attn_bwd_s = sparse_attention.core_s(sa, spec.mla, spec.layers, device, attn_dtype, b, s_q, s,
                                                         a_l)
        el_bytes += sparse_attention.elementwise_bytes(sa, spec.layers, T, e)
    elif mixer is not Mixer.ATTENTION:
        attn_fwd_s = attn_bwd_s = softmax_bytes = 0.0
        if mixer is Mixer.LINEAR:
            lm = spec.linear_mixer
            assert lm is not None
            core_flops = linear_mixer.scan_flops(lm, T, tp)
            attn_fwd_s, attn_bwd_s = linear_mixer.scan_s(lm, device, act_dtype, T, tp)
            el_bytes += linear_mixer.elementwise_bytes(lm, T, tp, e)
    elif attention.fused:
        # causal: the masked half of the s² tiles is skipped; the kernel's measured forward/backward speed
        attn_fwd_s, attn_bwd_s = eff.flash_attention_s(device, attn_dtype, b * a_l, s_q, s, d_qk, d_v,
                                                       kernel=attention.kernel)
        if band is not None:
            lf, lb = local_attention_s(band, device, attn_dtype, b * a_l, s_q, s, d_qk, d_v, attention.kernel)
            attn_fwd_s, attn_bwd_s = attn_fwd_s + share * (lf - attn_fwd_s), attn_bwd_s + share * (lb - attn_bwd_s)
        softmax_bytes = 0.0
    else:
        rows = b * a_l * s_q
        attn_fwd_s = eff.gemm_s(device, attn_dtype, rows, s, d_qk) + eff.gemm_s(device, attn_dtype, rows, d_v, s)
        softmax_bytes = T * a_l * s * ((4 * e + 1) if dropout else 2 * e)
        attn_fwd_s += eff.elementwise_s(device, softmax_bytes, 0)
        attn_bwd_s = 2 * attn_fwd_s
    el_fwd_s = eff.elementwise_s(device, el_bytes, 8)
    fwd_s = gemm_fwd_s + cast_fwd_s + attn_fwd_s + el_fwd_s
    bwd_s = 2 * gemm_fwd_s - no_dgrad_s + cast_bwd_s + attn_bwd_s + 2 * el_fwd_s
    fwd_flops = gemm_flops + core_flops
    other_fwd, other_bwd = attn_fwd_s + el_fwd_s, attn_bwd_s + 2 * el_fwd_s
    if recompute is Recompute.FULL:
        recompute_s, recompute_flops, other_rc = fwd_s, fwd_flops, other_fwd
    elif recompute is Recompute.SELECTIVE_OP:
        # every second matmul of torchtitan's block and all element-wise work, not attention (op_sac.py)
        again = op_sac.recomputed(op_sac.matmuls(spec, moe_layer, T, tp, M_e, fe_e))
        recompute_s = sum(eff.gemm_s(device, gemm_dtype, M, N, K) for M, N, K in again) / rate + el_fwd_s
        again = op_sac.recomputed(op_sac.matmuls(spec, moe_layer, T, tp, M_e * useful, fe_e))
        recompute_flops, other_rc = sum(2.0 * M * N * K for M, N, K in again), el_fwd_s
    elif (recompute is Recompute.SELECTIVE and attention is AttentionImpl.UNFUSED and mixer is Mixer.ATTENTION
          and spec.sparse_attention is None):  # DSA runs its own fused kernels: no unfused core to recompute
        recompute_s, recompute_flops, other_rc = attn_fwd_s, core_flops, attn_fwd_s
    else:
        recompute_s, recompute_flops, other_rc = 0.0, 0.0, 0.0
    return LayerCost(
        fwd_s=fwd_s, bwd_s=bwd_s, recompute_s=recompute_s, gemm_fwd_s=gemm_fwd_s, attn_fwd_s=attn_fwd_s,
        model_flops=3 * fwd_flops + bwd_flops_offset - no_dgrad_flops, recompute_flops=recompute_flops, other_fwd_s=other_fwd, other_bwd_s=other_bwd,
        other_recompute_s=other_rc, expert_fwd_s=expert_fwd_s,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class CpExchange:
    """The chunk a context-parallel rank exchanges with each other rank per layer (cp_exchange)."""

    nbytes: float
    backward: int  # exchanges of it in the backward
    overlapped: bool  # runs beside the attention core (ring attention), or blocks before it (an all-gather)


def cp_exchange(spec: ModelSpec, T: float, tp: int, e: float) -> CpExchange:
    """Ring attention's K and V of the rank's kv heads, 2·T·g_l·d·e, each step beside the core, sent again
    with their gradients in the backward; DSA's latent KV and indexer keys (sparse_attention.kv_chunk_bytes),
    all-gathered before the core (DSAttention.forward's gather_from_sequence_parallel_region, which
    nothing overlaps), their gradients reduce-scattered once."""
    if spec.sparse_attention is not None:
        assert spec.mla is not None
        return CpExchange(sparse_attention.kv_chunk_bytes(spec.sparse_attention, spec.mla, T, e), 1, False)
    return CpExchange(2 * T * max(spec.kv_heads // tp, 1) * spec.dhead * e, 2, True)


# Keys per tile of FlashAttention-2's forward kernel for head dims up to 128 (kBlockN, flash-attn
# csrc/flash_attn/src/flash_fwd_launch_template.h); FA3 and cuDNN tile alike
ATTN_TILE = 128


def local_attention_s(local: LocalAttention, device: Device, dtype: DType, batch_heads: float, s_q: float, s: int,
                      d_qk: float, d_v: float, kernel: str) -> tuple[float, float]:
    """(forward, backward) fused-kernel time of a local-attention layer over `s_q` of a sequence's `s` queries.
    Chunked: causal attention within each chunk (chunks are whole tiles), as batch_heads·s_q/c causal
    problems of c tokens. Sliding: each query block's band of k = keys_per_query keys also loads a
    partly masked tile at its trailing edge (ATTN_TILE/2 more keys on average), priced as
    batch_heads·s_q/k unmasked k × k problems, so a narrow band runs at a short sequence's efficiency."""
    if local.kind is LocalKind.CHUNKED:
        c = min(local.size, s)
        return eff.flash_attention_s(device, dtype, batch_heads * s_q / c, c, c, d_qk, d_v, kernel=kernel)
    k = local.keys_per_query(s) + ATTN_TILE / 2
    return eff.flash_attention_s(device, dtype, batch_heads * s_q / k, k, k, d_qk, d_v, causal=False, kernel=kernel)


@functools.lru_cache(maxsize=16384)
def head_cost(spec: ModelSpec, b: int, s: int, tp: int, cp: int, precision: Precision, device: Device) -> LayerCost:
    """LM head GEMM (T, V/tp, h) plus vocab-parallel cross-entropy (fp32 logits: ~19 bytes per logit
    over forward and backward) on the last stage; with multi-token prediction (spec.mtp_layers) each
    module passes through the shared head again after its 2h -> h projection (T, h/tp, 2h), so the
    last stage's extra work is (1 + mtp) heads and mtp projections. The MTP modules' transformer layers
    are ordinary layers of the last stage (model/stages.py)."""
    T = b * s // cp
    V_l = spec.vocab // tp if spec.vocab >= tp else spec.vocab
    # the output layer stays in the activation dtype under FP8 (Megatron's output_layer is not a TE module)
    g = eff.gemm_s(device, precision.activation_dtype, T, V_l, spec.hidden)
    ce = eff.elementwise_s(device, 19.0 * T * V_l, 0)
    flops = 2.0 * T * V_l * spec.hidden
    n, m = 1 + spec.mtp_layers, spec.mtp_layers
    proj_shape = (T, spec.hidden // tp, 2 * spec.hidden)  # each MTP module's 2h -> h projection
    proj = eff.gemm_s(device, precision.activation_dtype, *proj_shape) if m else 0.0
    g_all = n * g + m * proj
    return LayerCost(fwd_s=g_all + n * ce / 3, bwd_s=2 * g_all + 2 * n * ce / 3, recompute_s=0.0, gemm_fwd_s=g_all,
                     attn_fwd_s=0.0, other_fwd_s=n * ce / 3, other_bwd_s=2 * n * ce / 3,
                     model_flops=3 * (n * flops + m * 2.0 * math.prod(proj_shape)), recompute_flops=0.0)
