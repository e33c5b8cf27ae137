"""Hugging Face `config.json` of DeepSeek-V4 (`model_type` deepseek_v4: V4-Flash, V4-Pro and their bases).

Attention (ModelSpec.compressed_attention): one shared key-value head (`num_key_value_heads` 1) of `head_dim`,
queries through `q_lora_rank`, output through `o_groups` × `o_lora_rank`, a `sliding_window`, and per layer a
compression ratio: `compress_ratios` (the checkpoint's list; entries past `num_hidden_layers` belong to the
MTP layers) or transformers' `layer_types` ("sliding_attention", "compressed_sparse_attention",
"heavily_compressed_attention") with `compress_rates` naming each type's ratio, as Megatron Bridge's
DeepSeek-V4 bridge reads them. Ratio 0 is the window alone, 4 CSA (the lightning indexer of `index_n_heads`
× `index_head_dim` picks `index_topk` entries; the reference builds an indexer exactly where the ratio is 4),
any other one HCA; a model with two distinct HCA ratios is refused.
Residual: `hc_mult` streams (ModelSpec.residual_streams). MoE: `n_routed_experts`, `num_experts_per_tok`,
`moe_intermediate_size`, `n_shared_experts`; every layer is MoE, the first `num_hash_layers` routed by a
token-id table (the same expert work). `num_nextn_predict_layers` is the MTP depth.
A field read here is checked as hf.py checks every field; a bad one is one line naming it.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from distscope.errors import DistscopeError
from distscope.workload.hf_moe import _count, _must, check_moe_fields
from distscope.workload.spec import CompressedAttention, FfnKind, ModelSpec, MoESpec, NormKind, PositionKind

# its MoE-looking fields (hf_moe's check): the experts, the hash-routed layers (same expert work), the indexer's
# top-k and the checkpoint's expert storage dtype (not the training precision)
_READ = {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "num_hash_layers",
         "index_topk", "expert_dtype"}
_TYPES = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def load_deepseek_v4(cfg: dict[str, Any], path: str, name: str, source: str) -> ModelSpec:
    from distscope.workload.hf import _opt as opt
    from distscope.workload.hf import _req as req
    from distscope.workload.hf import _show as show

    check_moe_fields(cfg, path, "deepseek_v4", _READ)
    for key in ("moe_layer_freq", "decoder_sparse_step"):  # every layer is MoE
        _must(cfg, path, key, 1)
    for key in ("mlp_only_layers", "first_k_dense_replace"):
        if cfg.get(key):
            raise DistscopeError(f"{path}: {key}={show(cfg[key])}: DeepSeek-V4's layers are all MoE (need none)")
    layers = req(cfg, path, "num_hidden_layers")
    kv = opt(cfg, path, "num_key_value_heads", 1)
    if kv != 1:
        raise DistscopeError(f"{path}: num_key_value_heads={kv}: DeepSeek-V4 attention shares one key-value head "
                             "(need 1)")
    ratios = _ratios(cfg, path, layers, show)
    heavy = sorted({r for r in ratios if r not in (0, 4)})
    if len(heavy) > 1:
        raise DistscopeError(f"{path}: compress_ratios has heavy ratios {heavy}; distscope models one (with 0 and 4)")
    try:
        return _spec(cfg, path, name, source, layers, ratios, heavy)
    except DistscopeError as exc:  # a shape the spec refuses (heads not a multiple of o_groups, top-k > experts)
        if str(exc).startswith(path):
            raise
        raise DistscopeError(f"{path}: {exc} (from num_attention_heads, o_groups, n_routed_experts, "
                             "num_experts_per_tok)") from None


def _spec(cfg: dict[str, Any], path: str, name: str, source: str, layers: int, ratios: list[int],
          heavy: list[int]) -> ModelSpec:
    from distscope.workload.hf import _int as int_
    from distscope.workload.hf import _opt as opt
    from distscope.workload.hf import _req as req

    ca = CompressedAttention(
        window=req(cfg, path, "sliding_window"), sparse_layers=ratios.count(4),
        heavy_layers=len(ratios) - ratios.count(0) - ratios.count(4), heavy_ratio=heavy[0] if heavy else 128,
        topk=req(cfg, path, "index_topk"), index_heads=req(cfg, path, "index_n_heads"),
        index_dim=req(cfg, path, "index_head_dim"), q_lora_rank=req(cfg, path, "q_lora_rank"),
        o_lora_rank=req(cfg, path, "o_lora_rank"), o_groups=req(cfg, path, "o_groups"),
        rope_dim=opt(cfg, path, "qk_rope_head_dim", 64))
    moe = MoESpec(experts=req(cfg, path, "n_routed_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                  expert_ffn_hidden=req(cfg, path, "moe_intermediate_size"),
                  shared_experts=opt(cfg, path, "n_shared_experts", 0))
    return ModelSpec(
        name=name, layers=layers, hidden=req(cfg, path, "hidden_size"), heads=req(cfg, path, "num_attention_heads"),
        kv_heads=1, head_dim=req(cfg, path, "head_dim"), vocab=req(cfg, path, "vocab_size"),
        ffn_hidden=moe.expert_ffn_hidden * max(moe.shared_experts, 1),  # no dense layers: the shared expert's width
        ffn=FfnKind.SWIGLU, position=PositionKind.ROPE, norm=NormKind.RMSNORM, bias=False,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), moe=moe, compressed_attention=ca,
        residual_streams=opt(cfg, path, "hc_mult", 1), mtp_layers=_count(cfg, path, "num_nextn_predict_layers"),
        max_positions=int_(cfg, path, "max_position_embeddings") or 0, source=source)


def _is_ratio(r: Any) -> TypeGuard[int]:
    """A compression ratio as the configs write it: an integer >= 0 (0 = no compression)."""
    return isinstance(r, int) and not isinstance(r, bool) and r >= 0


def _ratios(cfg: dict[str, Any], path: str, layers: int, show: Any) -> list[int]:
    """Each backbone layer's compression ratio (module docstring)."""
    raw = cfg.get("compress_ratios")
    if raw is not None:
        if not isinstance(raw, list) or len(raw) < layers or not all(_is_ratio(r) for r in raw):
            raise DistscopeError(f"{path}: compress_ratios={show(raw)} must list an integer >= 0 for each of the "
                                 f"{layers} layers")
        return list(raw[:layers])
    types, rates = cfg.get("layer_types"), cfg.get("compress_rates") or {}
    if not isinstance(types, list) or len(types) < layers or not isinstance(rates, dict):
        raise DistscopeError(f"{path}: DeepSeek-V4 needs compress_ratios (one per layer) or layer_types "
                             f"({', '.join(_TYPES)}) with compress_rates; got layer_types={show(types)}")
    out = []
    for t in types[:layers]:
        if t not in _TYPES and t not in rates:
            raise DistscopeError(f"{path}: layer_types entry {show(t)} is not a DeepSeek-V4 layer type; valid: "
                                 f"{', '.join(_TYPES)}")
        r = 0 if t == "sliding_attention" else rates.get(t, _TYPES.get(t))
        if not _is_ratio(r):
            raise DistscopeError(f"{path}: compress_rates[{t!r}]={show(r)} must be an integer >= 0")
        out.append(r)
    return out
