"""Hugging Face `config.json` of the 2025-26 MoE families: Qwen3-MoE, DeepSeek-V3 and Kimi K2 (MLA),
DeepSeek-V3.2 (`deepseek_v32`) and GLM-5 (`glm_moe_dsa`): MLA with DeepSeek Sparse Attention (its indexer's
`index_*` fields; ModelSpec.sparse_attention),
GLM-4.5 / 4.6 / 4.7 (`glm4_moe`: DeepSeek-V3's MoE fields over GQA attention), GPT-OSS and Llama 4 (its
`text_config`).

Each family names its experts, top-k, expert width, shared experts and leading dense layers in its own
fields (transformers' `Qwen3MoeConfig`, `DeepseekV3Config`, `GptOssConfig`, `Llama4TextConfig`). The
fields that change only the router's numerics (scoring function, bias correction, group-limited routing,
auxiliary-loss weights, jitter) cost nothing here and are accepted. Any other field that looks like an
MoE setting is refused in one line naming it, its value and the fields this family reads: a layout
distscope cannot price is never guessed. What is priced approximately says so in a warning: Llama 4's
interleaved MoE layers (the dense ones placed first). Sliding-window and chunked layers are read in
hf.py. DeepSeek-V3's, Kimi K2's and GLM's `num_nextn_predict_layers` becomes the MTP depth
(ModelSpec.mtp_layers), priced on the last pipeline stage. GLM's attention extras cost next to nothing and are
not priced: QKV biases (`attention_bias`), per-head QK norms (`use_qk_norm`) and rotary on part of each head
(`partial_rotary_factor`); Megatron-Bridge's GLM45Bridge builds the same GPTModel layers with them.
"""

from __future__ import annotations

import re
from typing import Any

from distscope.errors import DistscopeError, warn
from distscope.workload.spec import FfnKind, MLASpec, ModelSpec, MoESpec, NormKind, PositionKind, SparseAttention

# routing numerics (no effect on FLOPs, bytes or communication), and the layout fields load_moe checks itself
_ROUTING = {"norm_topk_prob", "output_router_logits", "router_aux_loss_coef", "routed_scaling_factor", "topk_method",
            "n_group", "topk_group", "scoring_func", "aux_loss_alpha", "seq_aux", "ep_size", "router_jitter_noise",
            "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "interleave_moe_layer_step", "moe_layers",
            "num_nextn_predict_layers", "moe_router_dtype"}
READ = {
    "qwen3_moe": {"num_experts", "num_experts_per_tok", "moe_intermediate_size"},
    "deepseek_v3": {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
                    "first_k_dense_replace"},
    "gpt_oss": {"num_local_experts", "num_experts_per_tok", "experts_per_token"},
    "llama4_text": {"num_local_experts", "num_experts_per_tok", "intermediate_size_mlp"},
}
READ["kimi_k2"] = READ["glm4_moe"] = READ["deepseek_v3"]
# DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's fields, and GLM-5.2's shared top-k layers
_DSA = {"index_topk", "index_n_heads", "index_head_dim", "index_topk_freq", "index_skip_topk_offset",
        "index_topk_pattern", "indexer_types"}
READ["deepseek_v32"] = READ["glm_moe_dsa"] = READ["deepseek_v3"] | _DSA
FAMILIES = tuple(READ)
_MOE_LIKE = re.compile(r"expert|moe|router|topk|top_k|dense_replace|nextn|sparse_step|mlp_only", re.IGNORECASE)


def check_moe_fields(cfg: dict[str, Any], path: str, kind: str, read: set[str] | None = None) -> None:
    """Refuse an MoE-looking field this family does not read (module doc); `read`: the family's fields
    when it is not one of READ's."""
    from distscope.workload.hf import _show as show

    own = READ[kind] if read is None else read
    for key, value in cfg.items():
        if _MOE_LIKE.search(key) and key not in own | _ROUTING:
            raise DistscopeError(f"{path}: {key}={show(value)} is an MoE field distscope does not model for "
                                 f"model_type={kind}; it reads {', '.join(sorted(own))}")


def load_moe(cfg: dict[str, Any], path: str, kind: str, common: dict[str, Any], tied: bool) -> ModelSpec:
    """The ModelSpec of one of FAMILIES; `common` holds the fields every Llama-style config shares."""
    from distscope.workload.hf import _opt as opt
    from distscope.workload.hf import _req as req
    from distscope.workload.hf import _show as show

    check_moe_fields(cfg, path, kind)
    layers = common["layers"]
    mla = None
    if kind == "qwen3_moe":
        _must(cfg, path, "decoder_sparse_step", 1)
        if cfg.get("mlp_only_layers"):
            raise DistscopeError(f"{path}: mlp_only_layers={cfg['mlp_only_layers']!r} places dense layers "
                                 "among MoE ones; distscope models leading dense layers only (need [])")
        moe = MoESpec(experts=req(cfg, path, "num_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                      expert_ffn_hidden=req(cfg, path, "moe_intermediate_size"))
    elif kind in ("deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa"):
        _must(cfg, path, "moe_layer_freq", 1)
        moe = MoESpec(experts=req(cfg, path, "n_routed_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                      expert_ffn_hidden=req(cfg, path, "moe_intermediate_size"),
                      shared_experts=opt(cfg, path, "n_shared_experts", 0),
                      dense_layers=_count(cfg, path, "first_k_dense_replace"))
        mla = MLASpec(q_lora_rank=req(cfg, path, "q_lora_rank"), kv_lora_rank=req(cfg, path, "kv_lora_rank"),
                      qk_nope_head_dim=req(cfg, path, "qk_nope_head_dim"),
                      qk_rope_head_dim=req(cfg, path, "qk_rope_head_dim"), v_head_dim=req(cfg, path, "v_head_dim"))
        common = dict(common, head_dim=mla.qk_nope_head_dim)
        common = dict(common, mtp_layers=_count(cfg, path, "num_nextn_predict_layers"))
        types = cfg.get("mlp_layer_types")  # GLM-5's per-layer FFN kinds: the leading dense layers, then MoE
        if types is not None and types != ["dense"] * moe.dense_layers + ["sparse"] * (layers - moe.dense_layers):
            raise DistscopeError(f"{path}: mlp_layer_types={show(types)} is not {moe.dense_layers} 'dense' then "
                                 f"{layers - moe.dense_layers} 'sparse' (first_k_dense_replace): distscope models "
                                 "leading dense layers only")
        if kind in ("deepseek_v32", "glm_moe_dsa"):
            common = dict(common, sparse_attention=SparseAttention(
                topk=req(cfg, path, "index_topk"), index_heads=req(cfg, path, "index_n_heads"),
                index_dim=req(cfg, path, "index_head_dim"), indexer_layers=_indexer_layers(cfg, path, layers)))
    elif kind == "glm4_moe":  # Megatron-Bridge GLM45Bridge: moe_layer_freq [0] * first_k_dense_replace + [1] * rest
        _must(cfg, path, "moe_layer_freq", 1)
        moe = MoESpec(experts=req(cfg, path, "n_routed_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                      expert_ffn_hidden=req(cfg, path, "moe_intermediate_size"),
                      shared_experts=opt(cfg, path, "n_shared_experts", 0),
                      dense_layers=_count(cfg, path, "first_k_dense_replace"))
        common = dict(common, mtp_layers=_count(cfg, path, "num_nextn_predict_layers"))
    elif kind == "gpt_oss":
        moe = MoESpec(experts=req(cfg, path, "num_local_experts"),
                      top_k=req(cfg, path, "num_experts_per_tok", "experts_per_token"),
                      expert_ffn_hidden=common["ffn_hidden"])
    else:  # llama4_text: every `step`-th layer is MoE (16 routed experts + 1 shared in Scout, 128 in Maverick)
        step = opt(cfg, path, "interleave_moe_layer_step", 1)
        n_moe = layers // step
        listed = cfg.get("moe_layers")
        if listed is not None and (not isinstance(listed, list) or len(listed) != n_moe):
            raise DistscopeError(f"{path}: moe_layers={show(listed)} does not match interleave_moe_layer_step={step} "
                                 f"({n_moe} MoE layers of {layers})")
        if step > 1:
            warn(f"{path}: interleave_moe_layer_step={step}: its {layers - n_moe} dense layers are placed first "
                 "(pipeline splits see them at the front)")
        moe = MoESpec(experts=req(cfg, path, "num_local_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                      expert_ffn_hidden=common["ffn_hidden"], shared_experts=1, dense_layers=layers - n_moe)
        common = dict(common, ffn_hidden=opt(cfg, path, "intermediate_size_mlp", common["ffn_hidden"]))
    return ModelSpec(**common, ffn=FfnKind.SWIGLU, position=PositionKind.ROPE, norm=NormKind.RMSNORM,
                     bias=False, tied_embeddings=tied, moe=moe, mla=mla)


def _indexer_layers(cfg: dict[str, Any], path: str, layers: int) -> int:
    """How many layers run their own DSA indexer (0: all), as transformers' GlmMoeDsaConfig reads it: an
    `indexer_types` list ("full" / "shared") or `index_topk_pattern` string ("F" / "S") of one entry per
    layer, the first full (a shared layer reuses an earlier one's top-k); else layer i (0-based) is full
    when max(i − offset + 1, 0) is a multiple of `index_topk_freq` (offset `index_skip_topk_offset`,
    default 2, at least 1 as Megatron-Core's is_dsa_skip_topk_layer clamps it, with which the count then
    agrees)."""
    listed = cfg.get("indexer_types")
    key, full, shared = "indexer_types", "full", "shared"
    if listed is None and cfg.get("index_topk_pattern") is not None:  # a string of F / S, or a list as above
        listed, key = cfg["index_topk_pattern"], "index_topk_pattern"
        if isinstance(listed, str):
            full, shared = "F", "S"
    if listed is not None:
        if (not isinstance(listed, (list, str)) or len(listed) != layers or listed[0] != full
                or any(t not in (full, shared) for t in listed)):
            raise DistscopeError(f"{path}: {key}={listed!r} needs one {full!r} or {shared!r} per layer ({layers}), "
                                 f"the first {full!r}")
        return 0 if listed.count(full) == layers else listed.count(full)
    freq, offset = cfg.get("index_topk_freq", 1), cfg.get("index_skip_topk_offset", 2)
    for k, v in (("index_topk_freq", freq), ("index_skip_topk_offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if k == "index_topk_freq" else 0):
            raise DistscopeError(f"{path}: {k}={v!r} must be an integer >= {1 if k == 'index_topk_freq' else 0}")
    offset = max(offset, 1)  # layer 0 always runs its indexer (Megatron clamps; transformers would fail)
    n = sum(1 for i in range(layers) if max(i - offset + 1, 0) % freq == 0)
    return 0 if n == layers else n


def _count(cfg: dict[str, Any], path: str, key: str) -> int:
    """A count that may be 0 (absent = 0)."""
    v = cfg.get(key) or 0
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise DistscopeError(f"{path}: {key}={v!r} must be an integer >= 0")
    return v


def _must(cfg: dict[str, Any], path: str, key: str, want: int) -> None:
    v = cfg.get(key, want)
    if v != want:
        raise DistscopeError(f"{path}: {key}={v!r} is not modelled (distscope needs {want}: every layer after the "
                             "leading dense ones is MoE)")
