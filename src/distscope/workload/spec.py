"""Model architecture specs: transformer dims, attention kind, FFN kind, MoE shape.

A `ModelSpec` is pure architecture. Training shape (sequence, batch, precision) lives in `TrainingShape`
(workload/training.py); parallelization lives in `Plan` (plan.py).
"""

from __future__ import annotations

import dataclasses
import enum

from distscope.errors import DistscopeError
from distscope.hashing import cached_hash


class AttentionKind(enum.Enum):
    MHA = "mha"  # kv_heads == heads
    GQA = "gqa"  # 1 < kv_heads < heads
    MQA = "mqa"  # kv_heads == 1
    MLA = "mla"  # DeepSeek multi-head latent attention (low-rank q and kv)


class FfnKind(enum.Enum):
    GELU = "gelu"  # two GEMMs: h -> f -> h
    SWIGLU = "swiglu"  # three GEMMs: gate and up h -> f, down f -> h
    RELU2 = "relu2"  # squared ReLU, two GEMMs (Nemotron-4)

    @property
    def gemms(self) -> int:
        return 3 if self is FfnKind.SWIGLU else 2


class PositionKind(enum.Enum):
    LEARNED = "learned"  # absolute position table of max_positions x hidden (GPT-2/3)
    ROPE = "rope"
    ALIBI = "alibi"
    NONE = "none"  # no positional encoding in attention (Nemotron-H: its Mamba-2 layers carry position)


class NormKind(enum.Enum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class MoESpec:
    """Mixture-of-experts FFN shape (Mixtral, DeepSeek-V3).

    `dense_layers` leading layers keep a dense FFN of the model's ffn_hidden (DeepSeek-V3: 3).
    `latent` > 0: LatentMoE (Megatron-Core `moe_latent_size`, Nemotron 3 Super / Ultra): a projection
    h -> latent before dispatch and latent -> h after combine (moe_layer.py fc1/fc2_latent_proj, TP-duplicated),
    so tokens travel and routed experts compute at the latent width; shared experts stay at h.
    """

    experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int = 0
    dense_layers: int = 0
    latent: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= self.experts:
            raise DistscopeError(f"moe.top_k={self.top_k} must be in 1..experts={self.experts}")
        if self.expert_ffn_hidden < 1 or self.shared_experts < 0 or self.dense_layers < 0 or self.latent < 0:
            raise DistscopeError(f"moe spec has a negative or zero size: {self}")


class LocalKind(enum.Enum):
    SLIDING = "sliding"  # a query attends to the `size` most recent tokens, itself included (Mistral, Gemma, GPT-OSS)
    CHUNKED = "chunked"  # a query attends within its own `size`-token chunk (Llama 4's attention_chunk_size)


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalAttention:
    """Causal attention limited to nearby keys in `layers` of the model's layers; the others attend to the
    whole causal prefix. Hugging Face configs mark such layers in `layer_types` ("sliding_attention",
    "chunked_attention"); FlashAttention-2/3 and cuDNN run them as a band or block-diagonal mask and skip
    the tiles outside it, so their time follows the keys a query attends to, not the sequence."""

    kind: LocalKind
    size: int  # window or chunk, in tokens
    layers: int

    def __post_init__(self) -> None:
        if self.size < 1 or self.layers < 1:
            raise DistscopeError(f"local attention: size={self.size} and layers={self.layers} must be >= 1")

    def keys_per_query(self, s: int) -> float:
        """Mean keys a query attends to over a causal sequence of `s` tokens. Query i (0-based) sees
        min(i + 1, w) keys under a window of w, and (i mod c) + 1 under chunks of c:
            sliding: (w(w + 1)/2 + (s − w)·w) / s  for s > w
            chunked: (n·c(c + 1)/2 + r(r + 1)/2) / s  with s = n·c + r
        and the causal prefix's (s + 1)/2 when the sequence fits in one window or chunk."""
        w = self.size
        if s <= w:
            return (s + 1) / 2
        if self.kind is LocalKind.SLIDING:
            return (w * (w + 1) / 2 + (s - w) * w) / s
        n, r = divmod(s, w)
        return (n * w * (w + 1) / 2 + r * (r + 1) / 2) / s


class MixerKind(enum.Enum):
    MAMBA2 = "mamba2"  # Mamba-2's SSD (Dao & Gu 2024): Nemotron-H, Nemotron 3
    GATED_DELTANET = "gated-deltanet"  # Gated DeltaNet (Yang et al. 2025): Qwen3-Next, Qwen3.5


# Megatron's hybrid block symbols (megatron/core/models/hybrid/hybrid_layer_allocation.py Symbols): Mamba-2,
# attention, MLP, MoE
PATTERN_SYMBOLS = "M*-E"


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class LinearMixer:
    """Hybrid models whose token mixer is, in `layers` of its mixers, a linear recurrence run as a chunked
    scan (Mamba-2's state-space duality, Gated DeltaNet's delta rule) and softmax attention in the other
    `attention_layers`. The model's `layers` count its FFN (or MoE) blocks: Qwen3-Next pairs every mixer with
    an MoE block (36 + 12 mixers, 48 layers); Nemotron-H's blocks hold one mixer or one FFN each
    (Nemotron 3 Nano: 23 Mamba-2 + 6 attention mixers, 23 MoE blocks), so the two counts may differ and a
    layer's cost is the mean over the model's blocks.
    Shapes: value heads × head_dim is the recurrence's width (Mamba-2 mamba_num_heads × mamba_head_dim; GDN
    linear_num_value_heads × linear_value_head_dim); key_heads × key_dim its keys (Mamba-2 n_groups ×
    ssm_state_size for B and C; GDN linear_num_key_heads × linear_key_head_dim for q and k)."""

    kind: MixerKind
    layers: int
    attention_layers: int
    heads: int
    head_dim: int
    key_heads: int
    key_dim: int
    conv_kernel: int = 4
    chunk: int = 64  # the scan's chunk (Mamba-2 chunk_size; FLA's Gated DeltaNet kernels: 64)
    # each mixer and each FFN is a block of its own (Nemotron-H's pattern; Megatron's hybrid stack counts them
    # all in --num-layers and checkpoints each), else a mixer and an FFN make one layer (Qwen3-Next)
    separate_blocks: bool = False
    # the blocks in order, one of PATTERN_SYMBOLS each (Megatron's --hybrid-layer-pattern, the HF config's
    # hybrid_override_pattern) for separate blocks; "" where the order is not known. The cost model uses only
    # the counts; search/emit.py cuts the pattern into pipeline segments
    pattern: str = ""

    def __post_init__(self) -> None:
        for f in ("layers", "heads", "head_dim", "key_heads", "key_dim", "conv_kernel", "chunk"):
            if getattr(self, f) < 1:
                raise DistscopeError(f"linear_mixer.{f}={getattr(self, f)} must be >= 1")
        if self.attention_layers < 0:
            raise DistscopeError(f"linear_mixer.attention_layers={self.attention_layers} must be >= 0")
        if self.pattern:
            bad = sorted(set(self.pattern) - set(PATTERN_SYMBOLS))
            if bad or not self.separate_blocks or self.kind is not MixerKind.MAMBA2:
                raise DistscopeError(f"linear_mixer.pattern={self.pattern!r}: a block order of separate Mamba-2 "
                                     f"blocks, one of {PATTERN_SYMBOLS!r} each" + (f" (not {''.join(bad)!r})" if bad else ""))
            for sym, f in (("M", "layers"), ("*", "attention_layers")):
                if self.pattern.count(sym) != getattr(self, f):
                    raise DistscopeError(f"linear_mixer.pattern has {self.pattern.count(sym)} {sym!r} blocks, "
                                         f"linear_mixer.{f}={getattr(self, f)}")
        if self.heads % self.key_heads:
            raise DistscopeError(f"linear_mixer.heads={self.heads} not divisible by key_heads={self.key_heads}")

    def refusal(self, tp: int, cp: int) -> str | None:
        """Why a tp × cp layout cannot run these mixers (None: it can). TP splits heads and key heads
        (Megatron's MambaMixer: heads and groups divisible by tp); context parallelism over a recurrence
        passes the chunk state between ranks, a scheme this model does not price."""
        if cp > 1:
            return f"cp={cp}: context parallelism over {self.kind.value} layers is not modelled (use cp=1)"
        if self.heads % tp or self.key_heads % tp:
            return (f"tp={tp} must divide linear_mixer heads={self.heads} and key_heads={self.key_heads} "
                    f"({self.kind.value} layers shard both over TP)")
        return None

    @property
    def width(self) -> int:
        """The recurrence's value width (Mamba-2's d_inner)."""
        return self.heads * self.head_dim

    @property
    def key_width(self) -> int:
        return self.key_heads * self.key_dim

    @property
    def gate_width(self) -> int:
        """Per-head scalars the input projection also makes: Mamba-2's dt; GDN's beta and decay (b, a)."""
        return self.heads * (1 if self.kind is MixerKind.MAMBA2 else 2)

    @property
    def in_width(self) -> int:
        """The input projection's output: Mamba-2's z, x, B, C, dt; GDN's q, k, v, z and b, a."""
        return 2 * self.width + 2 * self.key_width + self.gate_width


class CompressedKind(enum.Enum):
    """A DeepSeek-V4 attention layer's kind (HF `compress_ratios`: 0, 4, 128 for Flash and Pro)."""

    SLIDING = "sliding"  # ratio 0: the sliding window alone
    SPARSE = "sparse"  # CSA: the window plus the indexer's top-k of the compressed prefix
    HEAVY = "heavy"  # HCA: the window plus every entry of a heavily compressed prefix


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class CompressedAttention:
    """DeepSeek-V4's hybrid attention (DeepSeek-V4 model card and reference inference/model.py; Megatron-Core
    DSv4HybridSelfAttention). One shared key-value head of the model's head_dim (K = V) and `heads` query
    heads; every layer attends a sliding `window` of raw keys. In `sparse_layers` (CSA, compress ratio
    `sparse_ratio`) a Compressor pools every `sparse_ratio` tokens into one entry (overlapping windows:
    its projections are twice as wide) and a lightning indexer (`index_heads` × `index_dim`, queries from
    q_lora) picks `topk` of them per query; in `heavy_layers` (HCA, ratio `heavy_ratio`) a query attends every
    compressed entry of its prefix; the other layers attend the window alone. Queries come through a
    low-rank `q_lora_rank`; the output through `o_groups` grouped projections to `o_lora_rank` each, then
    one o_groups·o_lora_rank -> h projection."""

    window: int
    sparse_layers: int
    heavy_layers: int
    topk: int
    index_heads: int
    index_dim: int
    q_lora_rank: int
    o_lora_rank: int
    o_groups: int
    sparse_ratio: int = 4
    heavy_ratio: int = 128
    rope_dim: int = 64  # qk_rope_head_dim: the part of each head (and of the output) RoPE rotates

    def __post_init__(self) -> None:
        for f in ("window", "topk", "index_heads", "index_dim", "q_lora_rank", "o_lora_rank", "o_groups",
                  "sparse_ratio", "heavy_ratio", "rope_dim"):
            if getattr(self, f) < 1:
                raise DistscopeError(f"compressed_attention.{f}={getattr(self, f)} must be >= 1")
        if self.sparse_layers < 0 or self.heavy_layers < 0:
            raise DistscopeError(f"compressed_attention: sparse_layers={self.sparse_layers} and "
                                 f"heavy_layers={self.heavy_layers} must be >= 0")

    def coff(self, kind: CompressedKind) -> int:
        """The compressor's width multiple: 2 where its windows overlap (ratio 4, the reference's
        `overlap = compress_ratio == 4`), else 1."""
        return 2 if self.ratio(kind) == 4 else 1

    def ratio(self, kind: CompressedKind) -> int:
        return {CompressedKind.SLIDING: 0, CompressedKind.SPARSE: self.sparse_ratio,
                CompressedKind.HEAVY: self.heavy_ratio}[kind]

    def keys_per_query(self, kind: CompressedKind, s: int) -> float:
        """Mean keys a query attends to over a causal sequence of s tokens: query i (1-based) sees
        min(i, window) raw keys plus its compressed entries (compressed_per_query), as the reference's
        get_window_topk_idxs, get_compress_topk_idxs and Indexer.forward select them."""
        window = LocalAttention(kind=LocalKind.SLIDING, size=self.window, layers=1)
        return window.keys_per_query(s) + self.compressed_per_query(kind, s)

    def kernel_keys(self, kind: CompressedKind, s: int) -> int:
        """Keys per query the sparse kernel loads: its index tensor has one fixed width for every query, the
        window plus min(topk, ⌊s/r⌋) (CSA) or ⌊s/r⌋ (HCA) entries, the ones a query may not see padded with −1
        and masked (the reference's get_window_topk_idxs, get_compress_topk_idxs and the indexer's topk)."""
        w = min(self.window, s)
        if kind is CompressedKind.SLIDING:
            return w
        n = s // self.ratio(kind)
        return w + (min(self.topk, n) if kind is CompressedKind.SPARSE else n)

    def compressed_per_query(self, kind: CompressedKind, s: int, selected: bool = True) -> float:
        """Mean compressed entries a query attends to: ⌊i/r⌋ under HCA, min(topk, ⌊i/r⌋) under CSA (all
        ⌊i/r⌋ of them when not `selected`: what the indexer scores), 0 in a sliding layer; summed in
        closed form, Σ_{i≤n} ⌊i/r⌋ = r·q(q − 1)/2 + q·(n − q·r + 1) with q = ⌊n/r⌋."""
        if kind is CompressedKind.SLIDING:
            return 0.0
        r = self.ratio(kind)

        def floors(n: int) -> int:
            q = n // r
            return r * q * (q - 1) // 2 + q * (n - q * r + 1)

        if kind is CompressedKind.HEAVY or not selected:
            return floors(s) / s
        cut = min(s, r * (self.topk + 1) - 1)  # beyond it every query takes the whole top-k
        return (floors(cut) + self.topk * (s - cut)) / s

    def refusal(self, tp: int, cp: int) -> str | None:
        """Why a tp × cp layout is not priced (None: it is). Tensor parallelism splits only part of the layer
        (Megatron Bridge replicates wq_a, wkv, the grouped wo_a, the compressors and the indexer on every TP
        rank), and the compressors' and the indexer's state crossing context-parallel ranks is not modelled;
        every published DeepSeek-V4 recipe runs tp=1, cp=1."""
        if cp > 1:
            return f"cp={cp}: context parallelism over DeepSeek-V4's compressed attention is not modelled (use cp=1)"
        if tp > 1:
            return (f"tp={tp}: tensor parallelism over DeepSeek-V4's compressed attention (replicated projections, "
                    "compressors and indexer) is not modelled (use tp=1, as its recipes do)")
        return None


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class MLASpec:
    """DeepSeek-V2/V3 multi-head latent attention ranks (DeepSeek-V3 report, Sec. 2.1.1)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class SparseAttention:
    """DeepSeek Sparse Attention over MLA (DSA: DeepSeek-V3.2-Exp report sec. 2.1; GLM-5; Megatron-Core
    experimental_attention_variant/dsa.py). A lightning indexer of `index_heads` × `index_dim` (queries from
    q_lora, one key of index_dim per token) scores each query's whole causal prefix; the query then attends
    only the `topk` best keys, through MLA in its absorbed (MQA) form. `indexer_layers` of the layers run
    their own indexer; the others reuse the top-k of the last one that did (GLM-5.2's `index_topk_freq`;
    0 = every layer runs it)."""

    topk: int
    index_heads: int
    index_dim: int
    indexer_layers: int = 0

    def __post_init__(self) -> None:
        for f in ("topk", "index_heads", "index_dim"):
            if getattr(self, f) < 1:
                raise DistscopeError(f"sparse_attention.{f}={getattr(self, f)} must be >= 1")
        if self.indexer_layers < 0:
            raise DistscopeError(f"sparse_attention.indexer_layers={self.indexer_layers} must be >= 0")

    def keys_per_query(self, s: int) -> float:
        """Mean keys a query attends to over a causal sequence of s tokens: query i (1-based) sees
        min(i, topk) of them, (k(k + 1)/2 + (s − k)·k)/s for s > k, the prefix's (s + 1)/2 otherwise (a
        sliding window of the same width has the same count)."""
        return LocalAttention(kind=LocalKind.SLIDING, size=self.topk, layers=1).keys_per_query(s)

    def indexer_share(self, layers: int) -> float:
        """The share of the layers that run their own indexer."""
        return 1.0 if self.indexer_layers == 0 else self.indexer_layers / layers


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    ffn: FfnKind
    position: PositionKind = PositionKind.ROPE
    norm: NormKind = NormKind.RMSNORM
    bias: bool = False  # linear-layer biases (GPT-2/3, BLOOM have them; Llama does not)
    tied_embeddings: bool = False
    embedding_norm: bool = False  # BLOOM's LayerNorm right after the word embedding
    max_positions: int = 0  # learned-position table size
    head_dim: int = 0  # 0 means hidden // heads
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    sparse_attention: SparseAttention | None = None  # DSA over MLA (DeepSeek-V3.2, GLM-5)
    # multi-token prediction depth (DeepSeek-V3 report sec. 2.2; Megatron --mtp-num-layers; HF
    # num_nextn_predict_layers): each module is a projection of [norm(h); norm(embedding)] (2h -> h), one
    # more transformer layer of the last layer's kind and another pass through the shared output head
    mtp_layers: int = 0
    local_attention: LocalAttention | None = None  # sliding-window or chunked layers (None: all layers full)
    linear_mixer: LinearMixer | None = None  # hybrid models: linear-recurrence mixers in some layers
    attention_gate: bool = False  # a sigmoid output gate on attention (Qwen3-Next's attn_output_gate): q_proj 2x
    compressed_attention: CompressedAttention | None = None  # DeepSeek-V4's sliding / CSA / HCA layers
    # manifold-constrained hyper-connections (mHC; DeepSeek-V4 hc_mult, Megatron mhc_num_residual_streams):
    # the residual is this many streams of h, mixed before and after each mixer and FFN; 1 = a plain residual
    residual_streams: int = 1
    official_params: float = 0.0  # published total parameter count, for tests
    official_params_precision: float = 0.0  # the published figure's rounding unit (e.g. 0.1e9 for "1.7B")
    source: str = ""

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"):
            if getattr(self, f) < 1:
                raise DistscopeError(f"model {self.name}: {f}={getattr(self, f)} must be >= 1")
        if self.heads % self.kv_heads:
            raise DistscopeError(
                f"model {self.name}: heads={self.heads} not divisible by kv_heads={self.kv_heads}"
            )
        if self.head_dim == 0 and self.hidden % self.heads:
            raise DistscopeError(f"model {self.name}: hidden={self.hidden} not divisible by heads={self.heads}")
        if self.mtp_layers < 0:
            raise DistscopeError(f"model {self.name}: mtp_layers={self.mtp_layers} must be >= 0")
        if self.local_attention is not None and self.local_attention.layers > self.layers:
            raise DistscopeError(f"model {self.name}: local_attention.layers={self.local_attention.layers} exceeds "
                                 f"layers={self.layers}")
        if self.linear_mixer is not None and self.local_attention is not None:
            raise DistscopeError(f"model {self.name}: linear_mixer and local_attention together are not modelled")
        if self.linear_mixer is not None and self.linear_mixer.pattern:
            p, routed = self.linear_mixer.pattern, (self.layers - self.moe.dense_layers) if self.moe else 0
            if (p.count("E"), p.count("-")) != (routed, self.layers - routed):
                raise DistscopeError(f"model {self.name}: linear_mixer.pattern has {p.count('E')} MoE ('E') and "
                                     f"{p.count('-')} MLP ('-') blocks, the model {routed} and {self.layers - routed}")
        if (ca := self.compressed_attention) is not None:
            if ca.sparse_layers + ca.heavy_layers > self.layers:
                raise DistscopeError(f"model {self.name}: compressed_attention sparse_layers + heavy_layers = "
                                     f"{ca.sparse_layers + ca.heavy_layers} exceeds layers={self.layers}")
            if self.kv_heads != 1 or self.mla is not None or self.linear_mixer is not None or self.local_attention:
                raise DistscopeError(f"model {self.name}: compressed_attention needs kv_heads=1 (one shared "
                                     "key-value head) and no mla, linear_mixer or local_attention")
            if self.heads % ca.o_groups:
                raise DistscopeError(f"model {self.name}: heads={self.heads} not divisible by "
                                     f"compressed_attention.o_groups={ca.o_groups}")
        if (sa := self.sparse_attention) is not None:
            if self.mla is None:
                raise DistscopeError(f"model {self.name}: sparse_attention (DSA) needs mla: its sparse core is MLA's "
                                     "absorbed form")
            if sa.indexer_layers > self.layers:
                raise DistscopeError(f"model {self.name}: sparse_attention.indexer_layers={sa.indexer_layers} exceeds "
                                     f"layers={self.layers}")
        if self.residual_streams < 1:
            raise DistscopeError(f"model {self.name}: residual_streams={self.residual_streams} must be >= 1")
        if self.position is PositionKind.LEARNED and self.max_positions < 1:
            raise DistscopeError(f"model {self.name}: learned positions need max_positions >= 1")

    @property
    def attention(self) -> AttentionKind:
        if self.mla is not None:
            return AttentionKind.MLA
        if self.kv_heads == self.heads:
            return AttentionKind.MHA
        return AttentionKind.MQA if self.kv_heads == 1 else AttentionKind.GQA

    @property
    def dhead(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def attention_share(self) -> float:
        """Softmax-attention mixers per layer (1 unless a hybrid: LinearMixer)."""
        m = self.linear_mixer
        return 1.0 if m is None else m.attention_layers / self.layers

    @property
    def linear_share(self) -> float:
        """Linear-recurrence mixers per layer (LinearMixer; 0 for a transformer)."""
        m = self.linear_mixer
        return 0.0 if m is None else m.layers / self.layers

    @property
    def blocks(self) -> int:
        """Megatron's --num-layers: the layers, or for a hybrid whose mixers and FFNs are separate blocks
        (Nemotron-H: LinearMixer.separate_blocks) its mixer and FFN blocks together."""
        m = self.linear_mixer
        if m is None or not m.separate_blocks:
            return self.layers
        return self.layers + m.layers + m.attention_layers

    @property
    def special_layers(self) -> str | None:
        """The layers only the analytical estimator prices (the simulator, serving and the trace price
        transformer layers), named for an error; None for a transformer."""
        if self.linear_mixer is not None:
            return f"linear-mixer layers ({self.linear_mixer.kind.value})"
        if self.compressed_attention is not None:
            return "DeepSeek-V4 compressed attention (CSA/HCA)"
        return None

    def layout_refusal(self, tp: int, cp: int) -> str | None:
        """Why a tp × cp layout is not priced for this architecture (None: it is)."""
        if self.linear_mixer is not None:
            return self.linear_mixer.refusal(tp, cp)
        if self.compressed_attention is not None:
            return self.compressed_attention.refusal(tp, cp)
        return None

    @property
    def expert_width(self) -> int:
        """The width routed tokens travel and the routed experts compute at: the hidden size, or LatentMoE's."""
        return self.moe.latent if self.moe is not None and self.moe.latent else self.hidden

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers
