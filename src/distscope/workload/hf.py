"""Build a ModelSpec from a Hugging Face `config.json` (Llama, Mistral/Mixtral, Qwen2, GPT-2, GPT-NeoX).

Only the architecture fields are read; no weights are loaded. Qwen2's q/k/v biases (3·(h + 2·g·d) per
layer, < 0.01% of parameters) are not modelled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.workload.spec import FfnKind, ModelSpec, MoESpec, NormKind, PositionKind

_SUPPORTED = ("llama", "mistral", "mixtral", "qwen2", "gpt2", "gpt_neox")


def _req(cfg: dict[str, Any], path: str, *keys: str) -> int:
    for k in keys:
        if cfg.get(k) is not None:
            return int(cfg[k])
    raise DistscopeError(f"{path}: missing field {' or '.join(keys)}")


def load_hf_config(path: str) -> ModelSpec:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        cfg = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DistscopeError(f"model={path!r}: cannot read a Hugging Face config.json ({exc})") from None
    kind = str(cfg.get("model_type", ""))
    name = p.parent.name or p.stem
    if kind == "gpt2":
        h = _req(cfg, path, "n_embd")
        return ModelSpec(
            name=name, layers=_req(cfg, path, "n_layer"), hidden=h, heads=_req(cfg, path, "n_head"),
            kv_heads=_req(cfg, path, "n_head"), ffn_hidden=int(cfg.get("n_inner") or 4 * h),
            vocab=_req(cfg, path, "vocab_size"), ffn=FfnKind.GELU, position=PositionKind.LEARNED,
            norm=NormKind.LAYERNORM, bias=True, tied_embeddings=True,
            max_positions=_req(cfg, path, "n_positions", "n_ctx"), source=str(p),
        )
    if kind not in _SUPPORTED:
        raise DistscopeError(f"{path}: model_type={kind!r} not supported; supported: {', '.join(_SUPPORTED)}")
    heads = _req(cfg, path, "num_attention_heads")
    common: dict[str, Any] = dict(
        name=name, layers=_req(cfg, path, "num_hidden_layers"), hidden=_req(cfg, path, "hidden_size"),
        heads=heads, kv_heads=int(cfg.get("num_key_value_heads") or heads),
        ffn_hidden=_req(cfg, path, "intermediate_size"), vocab=_req(cfg, path, "vocab_size"),
        head_dim=int(cfg.get("head_dim") or 0), source=str(p),
    )
    if kind == "gpt_neox":
        return ModelSpec(
            **common, ffn=FfnKind.GELU, position=PositionKind.ROPE, norm=NormKind.LAYERNORM, bias=True,
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        )
    moe = None
    if kind == "mixtral":
        moe = MoESpec(
            experts=_req(cfg, path, "num_local_experts"), top_k=_req(cfg, path, "num_experts_per_tok"),
            expert_ffn_hidden=common["ffn_hidden"],
        )
    return ModelSpec(
        **common, ffn=FfnKind.SWIGLU, position=PositionKind.ROPE, norm=NormKind.RMSNORM, bias=False,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), moe=moe,
    )
