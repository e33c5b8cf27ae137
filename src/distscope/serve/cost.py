"""The time of one serving iteration on one replica, as pure functions of what the iteration holds.

An iteration runs M tokens through the model: the decode tokens of n running sequences (one each) plus
the prompt tokens being prefilled. Per pipeline stage of L_s layers, on one GPU of the TP group
(a_l = a/tp heads, g_l = max(g/tp, 1) KV heads, f_l = f/tp):

  linear layers   Σ_W ‖t_c, t_m‖_p + t_k,  t_c = 2·m·N·K / (peak_c·η(N,K)),  t_m = (N·K·w_B + m·(N+K)·e) / (BW·η_mem)
                  (roofline per weight (N, K): compute-bound at large m, weight-read bound at small m —
                  the decode crossover is at m ≈ peak_c·η·w_B / (2·BW·η_mem) tokens, ~300 for bf16 on H100;
                  ‖x, y‖_p = (x^p + y^p)^(1/p) is how far the kernel overlaps the two, calibration.py)
  MoE experts     the same with m·k/ep tokens per GPU and only the experts hit read:
                  E_l·(1 − (1 − k/E)^m) of the E_l = E/ep local experts (each token picks k of E)
  decode attention  Σ_i ctx_i · L_s·2·g_l·d·kv_B / (BW·η_mem)    (the KV cache is read once per step;
                  a/g times over when the kernel reads it per query head instead of per KV group, stack.py)
  prefill attention 2·a_l·(d_qk + d_v)·Σ_j c_j·(p_j + c_j/2) / (peak16·η·flash_rel)  (causal, chunk c_j of a
                  prompt with p_j tokens already cached)
  element-wise    m · bytes_per_token / (BW·η_mem) + kernels·t_k  (norms, residual, activation, RoPE, KV write)
  TP all-reduce   2·L_s·AR(m·h·e)         (comm.py)
with m = M/pp tokens per micro-batch. The replica's iteration is pp stage times (its micro-batches
cross every stage), plus (pp−1) send/recv hops, plus the LM head on the rows that produce a token.
GEMM η, η_mem, flash_rel and the per-kernel fixed time t_k are the training estimator's calibrated
values (model/efficiency.py); p is the serving calibration's (calibration.py).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Protocol

from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.serve import calibration, comm
from distscope.serve.layout import Layout
from distscope.serve.precision import ServePrecision, weight_bytes
from distscope.system.topology import Cluster
from distscope.workload.spec import FfnKind, ModelSpec, PositionKind

ELEMENTWISE_KERNELS = 5  # per layer besides the GEMMs: input norm, RoPE + KV write, attention, add+norm, activation


class StepTimes(Protocol):
    """What the simulator needs of a step-time model: StepModel (the roofline), or a measured profile."""

    @property
    def kv_s_per_ctx_token(self) -> float: ...

    def time_s(self, tokens: float, ctx: float = 0.0, attn_units: float = 0.0, rows: float = 0.0) -> float: ...

    def decode_crossover_tokens(self) -> float: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Linear:
    """One weight's roofline coefficients, summed over the `count` layers of a stage that have it."""

    a_s: float  # compute seconds per token
    b_s: float  # weight-read seconds
    c_s: float  # activation-traffic seconds per token
    count: int
    p: float = math.inf  # compute/memory overlap exponent

    def time_s(self, m: float) -> float:
        return self.count * (overlap(self.a_s * m, self.b_s + self.c_s * m, self.p) + eff.KERNEL_S)


def overlap(t_c: float, t_m: float, p: float) -> float:
    """‖t_c, t_m‖_p: max() at p = ∞, the sum at p = 1."""
    if p == math.inf or t_c <= 0 or t_m <= 0:
        return max(t_c, t_m)
    hi, lo = (t_c, t_m) if t_c >= t_m else (t_m, t_c)
    return float(hi * (1.0 + (lo / hi) ** p) ** (1.0 / p))


@dataclasses.dataclass(frozen=True, slots=True)
class Experts:
    """Grouped expert GEMMs of the MoE layers of a stage (per-expert coefficients)."""

    a_s: float  # compute seconds per routed token (all of one expert's GEMMs)
    b_s: float  # weight-read seconds of one local expert
    c_s: float  # activation traffic per routed token
    local: int  # experts on this GPU
    miss: float  # 1 − k/E: probability that a token does not pick a given expert
    routed_per_token: float  # k/ep: routed tokens landing on this GPU per token
    count: int  # MoE layers in the stage
    kernels: int  # GEMM kernels per layer
    p: float = math.inf

    def time_s(self, m: float) -> float:
        r = m * self.routed_per_token
        hit = self.local * (1.0 - self.miss ** m) if m > 0 else 0.0
        return self.count * (overlap(self.a_s * r, self.b_s * hit + self.c_s * r, self.p) + self.kernels * eff.KERNEL_S)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class StepModel:
    """Coefficients of one replica's iteration time (built once by `step_model`, evaluated per step)."""

    pp: int
    linears: tuple[Linear, ...]
    experts: Experts | None
    fixed_s: float  # element-wise kernels' fixed cost per stage pass
    elem_s_per_token: float
    kv_s_per_ctx_token: float  # decode attention, per cached token read, per stage
    prefill_attn_s_per_unit: float  # per unit of Σ c·(p + c/2), per stage
    ar_lines: tuple[tuple[float, float], ...]
    ars_per_stage: int
    ar_bytes_per_token: float
    head: Linear
    head_gather_s_per_row: float
    p2p: tuple[float, float]
    p2p_bytes_per_token: float

    def stage_s(self, m: float, ctx: float, attn_units: float) -> float:
        t = self.fixed_s + self.elem_s_per_token * m + self.kv_s_per_ctx_token * ctx + self.prefill_attn_s_per_unit * attn_units
        for lin in self.linears:
            t += lin.time_s(m)
        if self.experts is not None:
            t += self.experts.time_s(m)
        if self.ars_per_stage:
            t += self.ars_per_stage * comm.all_reduce_s(self.ar_lines, m * self.ar_bytes_per_token)
        return t

    def time_s(self, tokens: float, ctx: float = 0.0, attn_units: float = 0.0, rows: float = 0.0) -> float:
        """GPU seconds of one iteration: `tokens` through the model, `ctx` cached tokens read by decode
        attention, prefill attention work `attn_units` = Σ c·(p + c/2), LM head on `rows` sequences."""
        pp = self.pp
        t = pp * self.stage_s(tokens / pp, ctx / pp, attn_units / pp)
        if rows > 0:
            t += self.head.time_s(rows) + self.head_gather_s_per_row * rows
        if pp > 1:
            a, b = self.p2p
            t += (pp - 1) * (a + b * self.p2p_bytes_per_token * tokens / pp)
        return t

    def decode_crossover_tokens(self) -> float:
        """Batch above which the linear layers turn compute-bound (Σa·m = Σ(b + c·m))."""
        a = sum(lin.a_s * lin.count for lin in self.linears)
        b = sum(lin.b_s * lin.count for lin in self.linears)
        c = sum(lin.c_s * lin.count for lin in self.linears)
        return b / (a - c) if a > c else math.inf


def _linear(N: float, K: float, count: int, compute: DType, w_B: float, e: float, cluster: Cluster) -> Linear:
    dev = cluster.device
    peak = dev.flops(compute)
    m = min(N, K)
    eta = eff.gemm_eta_max(dev.name, compute) * m / (m + eff.GEMM_KAPPA * peak / dev.hbm_Bps)
    bw = dev.hbm_Bps * eff.MEM_ETA
    return Linear(a_s=2.0 * N * K / (peak * eta), b_s=N * K * w_B / bw, c_s=(N + K) * e / bw, count=count,
                  p=calibration.current().gemm_overlap_p)


def stage_layers(spec: ModelSpec, pp: int) -> int:
    """Layers on the largest pipeline stage (even split, remainder on the first stages)."""
    return -(-spec.layers // pp)


def kv_bytes_per_token_layer(spec: ModelSpec, tp: int, kv: DType) -> float:
    """KV-cache bytes one token adds to one layer on one GPU: 2·g_l·d·kv_B (K and V; KV heads are
    replicated when tp > kv_heads), or MLA's latent (kv_lora_rank + rope dim) kept whole on every rank."""
    if spec.mla is not None:
        return (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * kv.bytes
    return 2.0 * max(spec.kv_heads // tp, 1) * spec.dhead * kv.bytes


@functools.lru_cache(maxsize=4096)
def step_model(spec: ModelSpec, cluster: Cluster, layout: Layout, prec: ServePrecision, custom_all_reduce: bool = True,
               gqa_grouped: bool = True) -> StepModel:
    tp, pp = layout.tp, layout.pp
    dev = cluster.device
    compute = prec.gemm_dtype(dev)
    e = prec.act16.bytes
    w_B = weight_bytes(prec.weights)
    h, a, g = spec.hidden, spec.heads, spec.kv_heads
    a_l, g_l = a // tp, max(g // tp, 1)
    Ls = stage_layers(spec, pp)
    moe_frac = 0.0 if spec.moe is None else spec.moe_layers / spec.layers
    n_moe = round(Ls * moe_frac)
    n_dense = Ls - n_moe
    up = 2 if spec.ffn is FfnKind.SWIGLU else 1
    bw = dev.hbm_Bps * eff.MEM_ETA

    shapes: list[tuple[float, float, int]] = []  # (N, K, layers)
    if spec.mla is not None:
        m_ = spec.mla
        d_qk, d_v = m_.qk_nope_head_dim + m_.qk_rope_head_dim, m_.v_head_dim
        shapes += [(m_.q_lora_rank, h, Ls), (a_l * d_qk, m_.q_lora_rank, Ls), (m_.kv_lora_rank + m_.qk_rope_head_dim, h, Ls),
                   (a_l * (m_.qk_nope_head_dim + d_v), m_.kv_lora_rank, Ls), (h, a_l * d_v, Ls)]
        # decode reads the latent and (absorbed) computes against it: 2·a_l·(2·kv_lora + rope) FLOPs per cached token
        dec_flops = 2.0 * a_l * (2 * m_.kv_lora_rank + m_.qk_rope_head_dim)
    else:
        d_qk = d_v = spec.dhead
        shapes += [((a_l + 2 * g_l) * d_qk, h, Ls), (h, a_l * d_v, Ls)]
        dec_flops = 2.0 * a_l * (d_qk + d_v)
    if n_dense:
        f_l = spec.ffn_hidden // tp
        shapes += [(f_l * up, h, n_dense), (h, f_l, n_dense)]
    linears = [_linear(N, K, n, compute, w_B, e, cluster) for N, K, n in shapes]

    experts = None
    act_bytes_per_token = 0.0
    if n_moe:
        assert spec.moe is not None
        mo = spec.moe
        fe = mo.expert_ffn_hidden // layout.etp
        e1, e2 = _linear(fe * up, h, 1, compute, w_B, e, cluster), _linear(h, fe, 1, compute, w_B, e, cluster)
        experts = Experts(a_s=e1.a_s + e2.a_s, b_s=e1.b_s + e2.b_s, c_s=e1.c_s + e2.c_s, local=mo.experts // layout.ep,
                          miss=1.0 - mo.top_k / mo.experts, routed_per_token=mo.top_k / layout.ep, count=n_moe, kernels=2,
                          p=e1.p)
        linears.append(_linear(mo.experts, h, n_moe, prec.act16, prec.act16.bytes, e, cluster))  # router, 16-bit
        if mo.shared_experts:
            fs = mo.expert_ffn_hidden * mo.shared_experts // tp
            linears += [_linear(fs * up, h, n_moe, compute, w_B, e, cluster), _linear(h, fs, n_moe, compute, w_B, e, cluster)]
        act_bytes_per_token += n_moe * (3 if up == 2 else 2) * e * fe * mo.top_k / layout.ep
    if n_dense:
        act_bytes_per_token += n_dense * (3 if up == 2 else 2) * e * (spec.ffn_hidden // tp)
    kvb = kv_bytes_per_token_layer(spec, tp, prec.kv)
    rope = 2 * (a_l + g_l) * d_qk * e if spec.position is PositionKind.ROPE else 0.0
    # norms (read + write h twice), residual adds (two reads and a write of h, twice), KV write
    elem_bytes = Ls * (2 * 2 * h * e + 2 * 3 * h * e + rope + kvb) + act_bytes_per_token

    peak16, eta16 = dev.flops(prec.act16), eff.gemm_eta_max(dev.name, prec.act16)
    # a kernel reading per query head repeats each KV block a/g times; L2 serves part of the repeats
    reads = 1.0 if gqa_grouped or spec.mla is not None else 1.0 + (a_l / g_l - 1.0) * (1.0 - calibration.current().mmha_l2_hit)
    kv_s = Ls * max(reads * kvb / bw, dec_flops / (peak16 * eta16))
    pre_s = Ls * 2.0 * a_l * (d_qk + d_v) / (peak16 * eta16 * eff.FLASH_ETA_REL)

    V_l = -(-spec.vocab // tp)
    head = _linear(V_l, h, 1, prec.act16, prec.act16.bytes, e, cluster)  # LM head stays 16-bit in FP8/int recipes
    lines = comm.all_reduce_lines(cluster, tp, custom_all_reduce)
    # logits [rows, V/tp] (fp32) gathered to the sampling rank: (tp−1)/tp of V·4 bytes per row cross the links
    gather = V_l * 4.0 * (tp - 1) * comm.s_per_byte(cluster, tp)
    return StepModel(
        pp=pp, linears=tuple(linears), experts=experts, fixed_s=Ls * ELEMENTWISE_KERNELS * eff.KERNEL_S,
        elem_s_per_token=elem_bytes / bw, kv_s_per_ctx_token=kv_s, prefill_attn_s_per_unit=pre_s,
        ar_lines=lines, ars_per_stage=0 if tp == 1 else 2 * Ls, ar_bytes_per_token=h * e, head=head,
        head_gather_s_per_row=gather, p2p=comm.p2p_line(cluster, tp, pp), p2p_bytes_per_token=h * e,
    )
