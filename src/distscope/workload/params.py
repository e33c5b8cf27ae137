"""Parameter counts, derived from the shapes of each weight matrix.

Per layer (h hidden, d head dim, a heads, g kv heads, f FFN hidden):
  attention  q: h·a·d,  k and v: 2·h·g·d,  out: a·d·h            (+ biases a·d + 2·g·d + h)
  MLA        h·q_r + q_r·a·(d_nope+d_rope) + h·(kv_r+d_rope) + kv_r·a·(d_nope+d_v) + a·d_v·h + norms
  FFN        2·h·f (GELU, squared ReLU) or 3·h·f (SwiGLU)         (+ biases)
  norms      2 per layer, 2h (LayerNorm) or h (RMSNorm)
  output gate  h·a·d more in q (Qwen3-Next's attn_output_gate)
  DeepSeek-V4 (spec.compressed_attention; reference inference/model.py; q_r, o_r ranks, G o_groups, c = 2 in
             CSA layers else 1, i × d_i the indexer's heads)  wq_a h·q_r + q_norm q_r + wq_b q_r·a·d + wkv h·d
             + kv_norm d + wo_a a·d·o_r (G groups of a·d/G -> o_r) + wo_b G·o_r·h + attn_sink a; a CSA or
             HCA layer's compressor 2·h·c·d + ape r·c·d (fp32) + norm d; a CSA layer's indexer
             q_r·i·d_i + h·i + its compressor 2·h·2·d_i + ape 4·2·d_i + norm d_i
  DSA        (spec.sparse_attention; Megatron-Core DSAIndexer) MLA's plus, in the layers that run an indexer,
             linear_wq_b q_r·i·d_i + linear_wk h·d_i + its LayerNorm 2·d_i + linear_weights_proj h·i
  mHC        (spec.residual_streams n > 1) per block (mixer and FFN) fn (n + 2)·n·n·h, base (n + 2)·n and 3
             scales; the output head's fn n·n·h, base n and 1 scale
Linear mixers (hybrid models, spec.linear_mixer; W = heads·head_dim, K = key_heads·key_dim, c the conv kernel):
  Mamba-2 (mamba_ssm / Megatron MambaMixer)  in_proj h·(2W + 2K + heads) (z, x, B, C, dt), depthwise conv
               (W + 2K)·(c + 1) with bias, dt_bias, A_log and D (heads each), gated norm W, out_proj W·h
  Gated DeltaNet (HF Qwen3NextGatedDeltaNet)  in_proj h·(2K + 2W) (q, k, v, z) and h·2·heads (b, a), conv
               (2K + W)·c without bias, dt_bias and A_log (heads each), gated norm head_dim, out_proj W·h
  A layer's mixer params are the mean over its mixers (attention_layers attention, layers linear), each
  mixer with its own norm, so a model whose blocks hold one mixer or one FFN each (Nemotron-H) counts
  one norm per block.
Embedding V·h, learned positions P·h, LM head V·h unless tied, final norm.
For GPT this reproduces Narayanan et al. 2021, eq. 2: P = 12lh²(1 + 13/(12h) + (V+s)/(12lh)).
"""

from __future__ import annotations

from distscope.workload.spec import CompressedKind, FfnKind, MixerKind, ModelSpec, NormKind


def norm_params(spec: ModelSpec) -> int:
    return 2 * spec.hidden if spec.norm is NormKind.LAYERNORM and spec.bias else spec.hidden


def attention_params(spec: ModelSpec) -> float:
    h, a, g, d = spec.hidden, spec.heads, spec.kv_heads, spec.dhead
    if spec.mla is not None:
        m = spec.mla
        return (
            h * m.q_lora_rank
            + m.q_lora_rank  # q_a RMSNorm
            + m.q_lora_rank * a * (m.qk_nope_head_dim + m.qk_rope_head_dim)
            + h * (m.kv_lora_rank + m.qk_rope_head_dim)
            + m.kv_lora_rank  # kv_a RMSNorm
            + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
            + a * m.v_head_dim * h
        ) + sparse_attention_params(spec)
    weights = h * a * d * (2 if spec.attention_gate else 1) + 2 * h * g * d + a * d * h
    biases = (a * d + 2 * g * d + h) if spec.bias else 0
    return weights + biases


def sparse_attention_params(spec: ModelSpec) -> float:
    """DSA's lightning indexer (module docstring), the mean over the layers; 0 without DSA."""
    sa, m = spec.sparse_attention, spec.mla
    if sa is None or m is None:
        return 0.0
    own = m.q_lora_rank * sa.index_heads * sa.index_dim + spec.hidden * (sa.index_dim + sa.index_heads)
    return sa.indexer_share(spec.layers) * (own + 2 * sa.index_dim)


def compressed_attention_params(spec: ModelSpec) -> float:
    """A DeepSeek-V4 attention layer's weights, the mean over its sliding, CSA and HCA layers (module docstring)."""
    ca = spec.compressed_attention
    assert ca is not None
    h, a, d, q_r = spec.hidden, spec.heads, spec.dhead, ca.q_lora_rank
    own = h * q_r + q_r + q_r * a * d + h * d + d + a * d * ca.o_lora_rank + ca.o_groups * ca.o_lora_rank * h + a

    def compressor(kind: CompressedKind, width: int) -> int:
        c = ca.coff(kind)
        return 2 * h * c * width + ca.ratio(kind) * c * width + width

    sparse = compressor(CompressedKind.SPARSE, d) + q_r * ca.index_heads * ca.index_dim + h * ca.index_heads
    sparse += compressor(CompressedKind.SPARSE, ca.index_dim)
    return own + (ca.sparse_layers * sparse + ca.heavy_layers * compressor(CompressedKind.HEAVY, d)) / spec.layers


def hyper_connection_params(spec: ModelSpec) -> int:
    """mHC's weights of one layer, its mixer's and its FFN's (module docstring); 0 for a plain residual."""
    n = spec.residual_streams
    return 0 if n == 1 else 2 * ((n + 2) * n * (n * spec.hidden + 1) + 3)


def linear_mixer_params(spec: ModelSpec) -> int:
    """One linear-recurrence mixer's weights (module docstring), without its norm."""
    m = spec.linear_mixer
    assert m is not None
    h, W, K, c = spec.hidden, m.width, m.key_width, m.conv_kernel
    proj = h * m.in_width + W * h  # in_proj and out_proj
    if m.kind is MixerKind.MAMBA2:
        return proj + (W + 2 * K) * (c + 1) + 3 * m.heads + W
    return proj + (2 * K + W) * c + 2 * m.heads + m.head_dim


def mixer_params(spec: ModelSpec) -> float:
    """A layer's token-mixer weights with the mixer's norm: attention, or for a hybrid the mean over its
    attention and linear mixers (module docstring)."""
    if spec.compressed_attention is not None:
        return compressed_attention_params(spec) + norm_params(spec)
    own = attention_params(spec) + norm_params(spec)
    if spec.linear_mixer is None:
        return own
    return spec.attention_share * own + spec.linear_share * (linear_mixer_params(spec) + norm_params(spec))


def ffn_params(spec: ModelSpec, ffn_hidden: int, width: int = 0) -> int:
    """An FFN of `ffn_hidden` on inputs of `width` (default: the hidden size; LatentMoE's experts: the latent)."""
    h, f = width or spec.hidden, ffn_hidden
    weights = spec.ffn.gemms * h * f
    biases = ((2 if spec.ffn is FfnKind.SWIGLU else 1) * f + h) if spec.bias else 0
    return weights + biases


def expert_params_per_moe_layer(spec: ModelSpec) -> int:
    """Routed-expert weights of one MoE layer (sharded by expert parallelism)."""
    assert spec.moe is not None
    return spec.moe.experts * ffn_params(spec, spec.moe.expert_ffn_hidden, spec.expert_width)


def dense_params_per_layer(spec: ModelSpec, moe_layer: bool) -> float:
    """Weights of one layer that every expert-parallel rank holds (mixer, norms, router, shared); a hybrid
    model's is the mean over its layers (mixer_params)."""
    common = mixer_params(spec) + norm_params(spec) + hyper_connection_params(spec)
    if not moe_layer:
        return common + ffn_params(spec, spec.ffn_hidden)
    assert spec.moe is not None
    shared = spec.moe.shared_experts * ffn_params(spec, spec.moe.expert_ffn_hidden)
    router = spec.hidden * spec.moe.experts
    latent = 2 * spec.hidden * spec.moe.latent  # LatentMoE's two projections
    return common + shared + router + latent


def tp_replicated_per_layer(spec: ModelSpec, moe_layer: bool) -> float:
    """Weights of one layer that tensor parallelism does not split (Megatron-LM: every TP rank holds the
    whole of them): the two norms, the row-parallel linears' biases (attention out, FFN out: h each) and
    the MoE router, DSA's indexer (Megatron builds its projections "duplicated"). MLA's internal layout is
    left as fully split."""
    router = spec.hidden * spec.moe.experts if moe_layer and spec.moe is not None else 0
    if moe_layer and spec.moe is not None:
        router += 2 * spec.hidden * spec.moe.latent  # LatentMoE's projections are TP-duplicated
    norms = 1.0 + spec.attention_share + spec.linear_share  # one per mixer and one per FFN
    return norms * norm_params(spec) + (2 * spec.hidden if spec.bias else 0) + router + sparse_attention_params(spec)


def tp_replicated_embedding(spec: ModelSpec) -> int:
    """Learned positions and the embedding norm: replicated over TP (the word embedding is vocab-parallel)."""
    return embedding_params(spec) - spec.vocab * spec.hidden


def embedding_params(spec: ModelSpec) -> int:
    pos = spec.max_positions * spec.hidden if spec.max_positions and spec.position.value == "learned" else 0
    emb_norm = norm_params(spec) if spec.embedding_norm else 0
    return spec.vocab * spec.hidden + pos + emb_norm


def head_params(spec: ModelSpec) -> int:
    """Final norm plus the LM head (zero extra when tied to the embedding), and mHC's output contraction."""
    n = spec.residual_streams
    hc = 0 if n == 1 else n * (n * spec.hidden + 1) + 1
    return norm_params(spec) + (0 if spec.tied_embeddings else spec.vocab * spec.hidden) + hc


def mtp_own_params(spec: ModelSpec) -> int:
    """What each MTP module adds besides its transformer layer: the two input norms and the 2h -> h
    projection (the embedding and the output head are shared with the main model)."""
    return 2 * norm_params(spec) + 2 * spec.hidden * spec.hidden


def mtp_last_is_moe(spec: ModelSpec) -> bool:
    """MTP modules repeat the kind of the model's last layer (DeepSeek-V3: an MoE layer)."""
    return spec.moe is not None and spec.moe_layers > 0


def total_params(spec: ModelSpec) -> int:
    layers = spec.dense_layers * dense_params_per_layer(spec, moe_layer=False)
    if spec.moe is not None:
        layers += spec.moe_layers * (dense_params_per_layer(spec, True) + expert_params_per_moe_layer(spec))
    if spec.mtp_layers:
        moe = mtp_last_is_moe(spec)
        layer = dense_params_per_layer(spec, moe) + (expert_params_per_moe_layer(spec) if moe else 0)
        layers += spec.mtp_layers * (layer + mtp_own_params(spec))
    return round(layers) + embedding_params(spec) + head_params(spec)


def active_params(spec: ModelSpec) -> int:
    """Parameters touched per token: routed experts count top_k of `experts`."""
    if spec.moe is None:
        return total_params(spec)
    routed = spec.moe.top_k * ffn_params(spec, spec.moe.expert_ffn_hidden, spec.expert_width)
    return total_params(spec) - spec.moe_layers * (expert_params_per_moe_layer(spec) - routed)
