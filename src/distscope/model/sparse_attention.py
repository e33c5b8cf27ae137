"""Work of one DeepSeek Sparse Attention layer (DSA; workload/spec.py SparseAttention) for one micro-batch on
one GPU, beyond the MLA projections it shares with a dense MLA layer (model/layer.py).

Sources: the DeepSeek-V3.2-Exp report (sec. 2.1: the lightning indexer, top-k selection, the KL loss that
trains the indexer on the main attention's distribution over the selected keys) and Megatron-Core's
implementation (experimental_attention_variant/dsa.py DSAIndexer / DSAttention, absorbed_mla.py,
dsa_cudnn_kernels.py: the fused cuDNN / FlashMLA path GLM-5's recipes run with dsa_kernel_backend=cudnn).

Shapes (T = b·s_q tokens on this GPU, s the sequence, a_l = a/tp query heads, q_r the query rank, d_c the
KV latent (kv_lora_rank), d_r the RoPE part (qk_rope_head_dim), i_h × i_d the indexer's heads and dim,
k̄ = SparseAttention.keys_per_query(s) the mean keys a query attends to, n̄ = (s + 1)/2 the mean causal
prefix, w = SparseAttention.indexer_share the layers that run their own indexer):
  indexer      linear_wq_b (T, i_h·i_d, q_r), linear_wk (T, i_d, h), linear_weights_proj (T, i_h, h): all
               "duplicated" on every TP rank (not split), so over all T tokens on each; their inputs are
               detached (DSAttention.forward: x.detach(), qr.detach()), so their backward is the weight
               gradient alone (model/layer.py prices it at one forward GEMM)
  scores       the head-summed ReLU(q·k) weights over each query's causal prefix: 2·T·i_h·i_d·n̄ FLOPs
               forward, priced as one GEMM (T, n̄, i_h·i_d): the kernel (DeepGEMM's fp8_mqa_logits, cuDNN's
               indexer_forward) reduces over the heads before it writes a score, so only the head-summed
               fp32 scores reach HBM, written and read once by the top-k selection: 8·T·n̄ bytes
  core         MLA in its absorbed (MQA) form, as the sparse kernels run it: every query head against k̄
               keys of width d_c + d_r, values of width d_c: 2·b·a_l·s_q·k̄·(2·d_c + d_r) FLOPs forward.
               Absorption moves kv_b_proj's work into a per-head q·W_UK and o·W_UV of the same FLOPs when
               queries and keys are the same tokens (training), so the MLA GEMMs stand as they are. The
               kernel compacts each query's valid indices (dsa_cudnn_kernels._compact_valid_topk_indices):
               priced as b·a_l·s_q/k̄ unmasked k̄ × k̄ problems on cuDNN's fused-attention curve (the sparse
               kernels, cuDNN's or FlashMLA's, run whatever the plan's attention implementation), like a
               sliding window (model/layer.py local_attention_s). FlashMLA's sparse prefill pads the local
               query heads to 64 (dsa_cudnn_kernels._flash_mla_head_padding): time at max(a_l, 64) heads
  indexer loss the main attention's head-summed distribution over the k̄ selected keys, recomputed
               (sparse_attn_score_recompute: the core's QKᵀ share, (d_c + d_r)/(2·d_c + d_r) of its
               forward), and the indexer's backward over those keys only (sparse loss): 2 × 2·T·i_h·i_d·k̄
               model FLOPs (dq, dk); its time is three such products (the logits again for the ReLU mask
               and the weights' gradient, then dq and dk) at max(i_h, 64) heads (cuDNN's backward pads
               the indexer heads to 64: _pad_indexer_heads_for_backward)
  element-wise RoPE over the indexer's q and k and its key LayerNorm, 2·e·T·(i_h·i_d + 2·i_d)
Model FLOPs count the core and the projections at three times their forward, the scores and the loss's
recompute once and the indexer's backward over the selected keys (flops).
Context parallelism (cp_comm_type allgather, the only kind DSA runs): each rank all-gathers the latent KV
and the indexer keys of the whole sequence, T·(d_c + d_r + i_d)·e bytes per rank, before the core and with
nothing beside it, and reduce-scatters their gradients in the backward (kv_chunk_bytes; model/layer.py
cp_exchange). The gathered rows are what the core keeps for its backward (activation_bytes).

Tensor parallelism: each TP rank holds a_l of the heads, so the loss's head-summed target over the selected
keys is all-reduced over the TP group in the forward, min(topk, s) fp32 values per token where the indexer
runs (compute_dsa_indexer_loss; loss_all_reduce_bytes), exposed: the loss needs it at once. With sequence
parallelism (which DSA needs at tp > 1: model/refusal.py) the indexer first all-gathers its own inputs, the
layer input x and the query latent qr (DSAIndexer.forward_before_topk: T·(h + q_r)·e; sp_gather_bytes),
exposed too; both inputs are detached, so nothing comes back in the backward.
Kernels: no benchmark of FlashMLA's or cuDNN's sparse kernel or of the indexer is in data/kernels;
`MISSING` names the gap where a verb prices one.
"""

from __future__ import annotations

from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model import fp8
from distscope.system.device import Device
from distscope.workload.spec import MLASpec, ModelSpec, SparseAttention

HEAD_PAD = 64  # heads the sparse kernels run at least (FlashMLA's prefill, cuDNN's indexer backward)

MISSING = ("no kernel benchmark of DeepSeek Sparse Attention's sparse MLA kernel or lightning indexer in "
           "data/kernels: the core is priced on the fused-attention curve at its FLOPs, the indexer's scores as a GEMM")


def gemms(sa: SparseAttention, spec: ModelSpec, T: float) -> list[fp8.Linear]:
    """The indexer's linear layers (module docstring), weighted by the layers that run it; their inputs
    come from norms (q_a's RMSNorm, the layer's input norm)."""
    assert spec.mla is not None
    w, h = sa.indexer_share(spec.layers), spec.hidden
    return [(w * T, sa.index_heads * sa.index_dim, spec.mla.q_lora_rank, True), (w * T, sa.index_dim, h, True),
            (w * T, sa.index_heads, h, True)]


def flops(sa: SparseAttention, m: MLASpec, layers: int, b: int, s_q: float, s: int, a_l: float) -> tuple[float, float]:
    """(forward FLOPs of the sparse core, the indexer's scores and the loss's score recompute; the backward's
    FLOPs less twice that forward, as model FLOPs count a backward at twice the forward elsewhere): the
    indexer's dense scores and the loss's recompute have no backward, and the indexer's backward covers the
    k̄ selected keys only, 2 × 2·T·i_h·i_d·k̄ (module docstring)."""
    d_c, d_r = m.kv_lora_rank, m.qk_rope_head_dim
    k, w = sa.keys_per_query(s), sa.indexer_share(layers)
    core = 2.0 * b * a_l * s_q * k * (2 * d_c + d_r)
    scores = 2.0 * b * s_q * sa.index_heads * sa.index_dim * (s + 1) / 2
    loss = 2.0 * b * a_l * s_q * k * (d_c + d_r)
    indexer_bwd = 2 * 2.0 * b * s_q * sa.index_heads * sa.index_dim * k
    return core + w * (scores + loss), w * (indexer_bwd - 2 * (scores + loss))


def core_s(sa: SparseAttention, m: MLASpec, layers: int, device: Device, dtype: DType, b: int, s_q: float, s: int,
           a_l: float) -> tuple[float, float]:
    """(forward, backward) time of the sparse core, the indexer's scores and top-k, and its loss (module
    docstring). The indexer's dense scores have no backward: the sparse loss reaches the indexer only
    through the selected keys."""
    d_c, d_r = m.kv_lora_rank, m.qk_rope_head_dim
    k, w = sa.keys_per_query(s), sa.indexer_share(layers)
    heads = max(a_l, HEAD_PAD)
    fwd, bwd = eff.flash_attention_s(device, dtype, b * heads * s_q / k, k, k, d_c + d_r, d_c, causal=False,
                                     kernel="cudnn")
    width = sa.index_heads * sa.index_dim  # the heads are summed in the kernel: one GEMM over all of them
    scores = eff.gemm_s(device, dtype, b * s_q, (s + 1) / 2, width)
    topk = eff.elementwise_s(device, 8.0 * b * s_q * (s + 1) / 2)
    recompute = fwd * (d_c + d_r) / (2 * d_c + d_r)
    indexer_bwd = 3 * eff.gemm_s(device, dtype, b * s_q, k, max(sa.index_heads, HEAD_PAD) * sa.index_dim)
    return fwd + w * (scores + topk + recompute), bwd + w * indexer_bwd


def elementwise_bytes(sa: SparseAttention, layers: int, T: float, e: float) -> float:
    """HBM bytes of the indexer's own element-wise kernels per forward (module docstring)."""
    return sa.indexer_share(layers) * 2 * e * T * (sa.index_heads * sa.index_dim + 2 * sa.index_dim)


def activation_bytes(sa: SparseAttention, m: MLASpec, layers: int, T: float, cp: int, s: int, a_l: float, d: int,
                     e: float) -> float:
    """What a DSA layer keeps for its backward beyond a dense MLA layer's q, k, v at head dim d
    (model/memory.py): the absorbed core's query (a_l·(d_c + d_r)) and latent output (a_l·d_c) per token, its
    latent KV (d_c + d_r) and the indexer's keys (i_d) over the cp·T rows context parallelism gathers, and
    where the indexer runs its q and weights (i_h·i_d + i_h, in e bytes) and the selected indices
    (min(topk, s) int32 per token)."""
    d_c, d_r = m.kv_lora_rank, m.qk_rope_head_dim
    w = sa.indexer_share(layers)
    own = T * (e * (a_l * (2 * d_c + d_r) - 3 * a_l * d)
               + w * (e * (sa.index_heads * sa.index_dim + sa.index_heads) + 4 * min(sa.topk, s)))
    return own + cp * T * e * (d_c + d_r + w * sa.index_dim)


def kv_chunk_bytes(sa: SparseAttention, m: MLASpec, T: float, e: float) -> float:
    """Bytes of one rank's chunk that context parallelism all-gathers per layer (module docstring)."""
    return T * (m.kv_lora_rank + m.qk_rope_head_dim + sa.index_dim) * e


def loss_all_reduce_bytes(sa: SparseAttention, layers: int, T: float, s: int) -> float:
    """Bytes of the indexer loss's TP all-reduce per layer and micro-batch, the mean over the layers (module
    docstring): 4·T·min(topk, s) where the indexer runs."""
    return sa.indexer_share(layers) * 4.0 * T * min(sa.topk, s)


def sp_gather_bytes(sa: SparseAttention, spec: ModelSpec, T: float, e: float) -> float:
    """Bytes the indexer all-gathers over the TP group per layer and micro-batch under sequence parallelism,
    the mean over the layers (module docstring): x and qr, T·(h + q_r)·e where the indexer runs."""
    assert spec.mla is not None
    return sa.indexer_share(spec.layers) * T * (spec.hidden + spec.mla.q_lora_rank) * e
