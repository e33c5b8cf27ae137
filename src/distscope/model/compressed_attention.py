"""Work of one DeepSeek-V4 attention layer (workload/spec.py CompressedAttention) for one micro-batch on one GPU.

Shapes (T tokens on this GPU, h hidden, a_l query heads of d = head_dim, one shared key-value head, q_r / o_r
the query and output ranks, g_l = o_groups output groups, i_l = index_heads, c = 2 where compressor windows
overlap (CSA) else 1; DeepSeek-V4 reference inference/model.py, Attention / Compressor / Indexer). The layer
runs unsplit: tensor parallelism over it is refused (CompressedAttention.refusal), so a_l = a.
  queries      wq_a (T, q_r, h), wq_b (T, a_l·d, q_r)
  key-value    wkv (T, d, h)                           (one head)
  output       wo_a, a batched GEMM over g_l groups (T, o_r, a_l·d/g_l), then wo_b (T, h, g_l·o_r)
  compressor   wkv and wgate (T, 2·c·d, h), in CSA and HCA layers
  indexer      wq_b (T, i_l·d_i, q_r), weights_proj (T, i_l, h) and a compressor of its own at d_i (CSA only),
               then its scores over the compressed prefix: 2·T·i_l·d_i·n̄ FLOPs forward, n̄ the mean
               compressed entries a query sees (the causal half: the kernel skips masked blocks)
  core         every query head against CompressedAttention.keys_per_query keys (window + compressed
               entries) of width d, K = V: 2·b·a_l·s_q·k̄·2d FLOPs forward (the useful work); its time is the
               kernel's fixed-width index set (CompressedAttention.kernel_keys: masked entries are loaded too),
               priced as s_q/k unmasked k × k problems like a sliding window (model/layer.py local_attention_s)
  element-wise the per-head query RMS norm (a_l·d in and out), RoPE over the last rope_dim of each query and
               key head (in and out), and the compressor's softmax pooling (reads kv and gate, 2·c·d), e bytes each

Kernels: no benchmark of FlashMLA's sparse kernel, of cuDNN's DSA kernel or of the lightning indexer is in
data/kernels. The core is priced on the plan's fused-attention curve at the same FLOPs (the head dim of
512 is past the curves' last measured dim: the efficiency stays at it) and the indexer's scores as one GEMM
(T, n̄, i_l·d_i): the kernel sums its heads before it writes a score (model/sparse_attention.py, DSA's);
`MISSING` names the gap where a verb prices one.

Manifold-constrained hyper-connections (spec.residual_streams n > 1; DeepSeek-V4 Block.hc_pre / hc_post):
before each mixer and FFN the n·h residual is read twice (the mixing coefficients, then the weighted
sum) and one h written; after it the n streams and the branch output are read and n streams written:
(4n + 2)·h·e bytes per token per block against the plain residual add's 3·h·e (`hyper_connection_bytes`).
The coefficient GEMM (T, (n + 2)·n, n·h) is that first read; its FLOPs are negligible.
"""

from __future__ import annotations

from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model import fp8
from distscope.system.device import Device
from distscope.workload.spec import CompressedAttention, CompressedKind, ModelSpec

MISSING = ("no kernel benchmark of DeepSeek-V4's sparse attention or lightning indexer in data/kernels: priced "
           "on the fused-attention curve at the same FLOPs")


def shares(spec: ModelSpec) -> tuple[tuple[float, CompressedKind], ...]:
    """Each attention kind's share of the layers (sliding = the rest)."""
    ca = spec.compressed_attention
    assert ca is not None
    sparse, heavy = ca.sparse_layers / spec.layers, ca.heavy_layers / spec.layers
    return ((1.0 - sparse - heavy, CompressedKind.SLIDING), (sparse, CompressedKind.SPARSE),
            (heavy, CompressedKind.HEAVY))


def gemms(ca: CompressedAttention, kind: CompressedKind, T: float, h: int, a_l: float, d: int) -> list[fp8.Linear]:
    """The layer's linear layers (module docstring); inputs from a norm are marked for TE's fused cast."""
    g_l = ca.o_groups
    out: list[fp8.Linear] = [(T, ca.q_lora_rank, h, True), (T, a_l * d, ca.q_lora_rank, True), (T, d, h, True),
                             (T * g_l, ca.o_lora_rank, a_l * d / g_l, False), (T, h, g_l * ca.o_lora_rank, False)]
    if kind is not CompressedKind.SLIDING:
        out.append((T, 2 * ca.coff(kind) * d, h, True))
    if kind is CompressedKind.SPARSE:
        i_l = ca.index_heads
        out += [(T, i_l * ca.index_dim, ca.q_lora_rank, True), (T, i_l, h, True),
                (T, 2 * ca.coff(kind) * ca.index_dim, h, True)]
    return out


def core_flops(ca: CompressedAttention, kind: CompressedKind, b: int, s_q: float, s: int, a_l: float,
               d: int) -> float:
    """Forward FLOPs of the attention core (module docstring)."""
    return 2.0 * b * a_l * s_q * ca.keys_per_query(kind, s) * 2 * d


def indexer_flops(ca: CompressedAttention, kind: CompressedKind, T: float, s: int) -> float:
    """Forward FLOPs of the lightning indexer's scores (CSA layers only)."""
    if kind is not CompressedKind.SPARSE:
        return 0.0
    return 2.0 * T * ca.index_heads * ca.index_dim * ca.compressed_per_query(kind, s, selected=False)


def core_s(ca: CompressedAttention, kind: CompressedKind, device: Device, dtype: DType, gemm_dtype: DType,
           b: int, s_q: float, s: int, a_l: float, d: int, kernel: str) -> tuple[float, float]:
    """(forward, backward) time of the attention core and the indexer's scores (module docstring); the
    indexer's backward (its own distillation loss) at twice its forward, as a GEMM's."""
    k = ca.kernel_keys(kind, s)
    fwd, bwd = eff.flash_attention_s(device, dtype, b * a_l * s_q / k, k, k, d, d, causal=False, kernel=kernel)
    if kind is CompressedKind.SPARSE:  # below the ratio there are no compressed keys: an empty GEMM (gemm_s)
        n = ca.compressed_per_query(kind, s, selected=False)
        idx = eff.gemm_s(device, gemm_dtype, b * s_q, n, ca.index_heads * ca.index_dim)  # heads summed in-kernel
        fwd, bwd = fwd + idx, bwd + 2 * idx
    return fwd, bwd


def elementwise_bytes(ca: CompressedAttention, kind: CompressedKind, T: float, a_l: float, d: int, e: float) -> float:
    """HBM bytes of the layer's own element-wise kernels per forward (module docstring)."""
    pool = 0.0 if kind is CompressedKind.SLIDING else 2 * ca.coff(kind) * d
    if kind is CompressedKind.SPARSE:
        pool += 2 * ca.coff(kind) * ca.index_dim
    return T * e * (2 * a_l * d + 2 * (a_l + 1) * ca.rope_dim + pool)


def activation_bytes(spec: ModelSpec, ca: CompressedAttention, T: float, e: float, gi: float) -> float:
    """What a DeepSeek-V4 attention layer keeps for its backward beyond a plain attention's q, k, v and output
    (model/memory.py), the mean over its kinds: wq_b's and wo_b's inputs (gi·(q_r + g_l·o_r)), the compressor's
    kv and gate (2·c·d, CSA and HCA) and the indexer's queries, head weights and compressor (CSA)."""
    per = gi * (ca.q_lora_rank + ca.o_groups * ca.o_lora_rank)
    for w, kind in shares(spec)[1:]:
        c, d = ca.coff(kind), spec.dhead
        kept = 2.0 * c * d
        if kind is CompressedKind.SPARSE:
            kept += ca.index_heads * (ca.index_dim + 1) + 2 * c * ca.index_dim
        per += w * e * kept
    return T * per


def hyper_connection_bytes(n: int, tokens: float, h: int, e: float) -> float:
    """Extra HBM bytes of mHC per block over a plain residual add (module docstring): (4n − 1)·h·e per token."""
    return 0.0 if n <= 1 else tokens * (4 * n - 1) * h * e
