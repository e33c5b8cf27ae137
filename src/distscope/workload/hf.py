"""Build a ModelSpec from a Hugging Face `config.json` (Llama, Mistral/Mixtral, Qwen2/Qwen3, GPT-2, GPT-NeoX;
the MoE families of 2025-26 in hf_moe.py: Qwen3-MoE, DeepSeek-V3, Kimi K2, GPT-OSS, Llama 4; DeepSeek-V4 in
hf_deepseek_v4.py; the hybrids with
linear-recurrence layers in hf_hybrid.py: Qwen3-Next and Qwen3.5, Nemotron-H and Nemotron 3).

Only the architecture fields are read; no weights are loaded. Sliding-window and chunked layers
(`layer_types`, `sliding_window`, `attention_chunk_size`) become ModelSpec.local_attention. Qwen2's q/k/v biases (3·(h + 2·g·d) per
layer, < 0.01% of parameters) are not modelled.

Every field read is checked before use: a size must be a JSON integer >= 1 (an integral float such as
4096.0 is accepted; 4096.7, true, "4096", NaN and Infinity are not), a flag must be true or false. A bad
field is one DistscopeError line naming the file, the field and the value, never a truncated number.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.userfile import read_text
from distscope.workload import hf_hybrid
from distscope.workload.hf_deepseek_v4 import load_deepseek_v4
from distscope.workload.hf_moe import FAMILIES, load_moe
from distscope.workload.spec import FfnKind, LocalAttention, LocalKind, ModelSpec, MoESpec, NormKind, PositionKind

_SUPPORTED = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gpt2", "gpt_neox", *FAMILIES, "deepseek_v4", "llama4",
              *hf_hybrid.FAMILIES, *hf_hybrid.WRAPPERS)
# Sizes above 2**53 are not exact as floats, which is what the estimator computes in.
_MAX_INT = 2**53


def _show(v: Any) -> str:
    """The value as the file spells it (JSON), short."""
    try:
        text = json.dumps(v)
    except (TypeError, ValueError, RecursionError):
        text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(cfg: dict[str, Any], path: str, key: str) -> int | None:
    """The field as a positive integer, or None when it is absent or null."""
    v = cfg.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DistscopeError(f"{path}: {key}={_show(v)} must be a positive integer")
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        raise DistscopeError(f"{path}: {key}={_show(v)} must be a positive integer (not a fraction, NaN or Infinity)")
    if not 1 <= v <= _MAX_INT:
        raise DistscopeError(f"{path}: {key}={_show(v)} must be an integer in 1..2**53")
    return int(v)


def _req(cfg: dict[str, Any], path: str, *keys: str) -> int:
    """The first of `keys` that is present (not null), as a positive integer."""
    for k in keys:
        v = _int(cfg, path, k)
        if v is not None:
            return v
    raise DistscopeError(f"{path}: missing field {' or '.join(keys)}")


def _opt(cfg: dict[str, Any], path: str, key: str, default: int) -> int:
    v = _int(cfg, path, key)
    return default if v is None else v


def _flag(cfg: dict[str, Any], path: str, key: str, default: bool) -> bool:
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise DistscopeError(f"{path}: {key}={_show(v)} must be true or false")
    return v


def _read(path: str, p: Path) -> dict[str, Any]:
    text = read_text(p, "Hugging Face config.json")  # missing, a directory, not UTF-8: one line naming the file
    try:
        cfg = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DistscopeError(f"model={path!r}: cannot read a Hugging Face config.json ({exc})") from None
    if not isinstance(cfg, dict):
        raise DistscopeError(f"model={path!r}: a Hugging Face config.json holds a JSON object, got {type(cfg).__name__}")
    return cfg


def load_hf_config(path: str) -> ModelSpec:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    cfg = _read(path, p)
    kind = cfg.get("model_type", "")
    if not isinstance(kind, str):
        raise DistscopeError(f"{path}: model_type={_show(kind)} must be a string; supported: {', '.join(_SUPPORTED)}")
    name = p.parent.name or p.stem
    wrapped = {"llama4": "llama4_text", **hf_hybrid.WRAPPERS}
    if kind in wrapped:  # a multimodal wrapper: the language model is its text_config
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise DistscopeError(f"{path}: model_type={kind} needs a text_config object")
        cfg, kind = text, wrapped[kind]
    if kind in hf_hybrid.FAMILIES:
        return hf_hybrid.load_hybrid(cfg, path, kind, p.parent.name or p.stem, str(p))
    if kind == "deepseek_v4":
        return load_deepseek_v4(cfg, path, p.parent.name or p.stem, str(p))
    context = _int(cfg, path, "max_position_embeddings")  # the context window (0 = not stated)
    if kind == "gpt2":
        h = _req(cfg, path, "n_embd")
        heads = _req(cfg, path, "n_head")
        return ModelSpec(
            name=name, layers=_req(cfg, path, "n_layer"), hidden=h, heads=heads,
            kv_heads=heads, ffn_hidden=_opt(cfg, path, "n_inner", 4 * h),
            vocab=_req(cfg, path, "vocab_size"), ffn=FfnKind.GELU, position=PositionKind.LEARNED,
            norm=NormKind.LAYERNORM, bias=True, tied_embeddings=True,
            max_positions=_req(cfg, path, "n_positions", "n_ctx"), source=str(p),
        )
    if kind not in _SUPPORTED:
        raise DistscopeError(f"{path}: model_type={kind!r} not supported; supported: {', '.join(_SUPPORTED)}")
    heads = _req(cfg, path, "num_attention_heads")
    common: dict[str, Any] = dict(
        name=name, layers=_req(cfg, path, "num_hidden_layers"), hidden=_req(cfg, path, "hidden_size"),
        heads=heads, kv_heads=_opt(cfg, path, "num_key_value_heads", heads),
        ffn_hidden=_req(cfg, path, "intermediate_size"), vocab=_req(cfg, path, "vocab_size"),
        head_dim=_opt(cfg, path, "head_dim", 0), max_positions=context or 0, source=str(p),
    )
    tied = _flag(cfg, path, "tie_word_embeddings", False)
    if kind == "gpt_neox":
        return ModelSpec(
            **common, ffn=FfnKind.GELU, position=PositionKind.ROPE, norm=NormKind.LAYERNORM, bias=True,
            tied_embeddings=tied,
        )
    local = _local_attention(cfg, path, kind, common["layers"])
    if kind in FAMILIES:
        return dataclasses.replace(load_moe(cfg, path, kind, common, tied), local_attention=local)
    moe = None
    if kind == "mixtral":
        moe = MoESpec(
            experts=_req(cfg, path, "num_local_experts"), top_k=_req(cfg, path, "num_experts_per_tok"),
            expert_ffn_hidden=common["ffn_hidden"],
        )
    return ModelSpec(
        **common, ffn=FfnKind.SWIGLU, position=PositionKind.ROPE, norm=NormKind.RMSNORM, bias=False,
        tied_embeddings=tied, moe=moe, local_attention=local,
    )


_LAYER_KINDS = {"full_attention": None, "sliding_attention": LocalKind.SLIDING, "chunked_attention": LocalKind.CHUNKED}
_SIZE_FIELD = {LocalKind.SLIDING: "sliding_window", LocalKind.CHUNKED: "attention_chunk_size"}


def _local_attention(cfg: dict[str, Any], path: str, kind: str, layers: int) -> LocalAttention | None:
    """The layers that attend locally: transformers' `layer_types` where the file lists it, else each
    family's own rule (the config classes' defaults): Mistral/Mixtral window every layer when
    `sliding_window` is set; Qwen2/Qwen3(-MoE) the layers from `max_window_layers` on when
    `use_sliding_window`; GPT-OSS every second layer from the first; Llama 4 chunks its RoPE layers
    (`no_rope_layers` 1, by default all but every `no_rope_layer_interval`-th)."""
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or any(not isinstance(t, str) or t not in _LAYER_KINDS for t in types):
            raise DistscopeError(f"{path}: layer_types={_show(types)} must list one of "
                                 f"{', '.join(_LAYER_KINDS)} for each of the {layers} layers")
        kinds = {_LAYER_KINDS[t] for t in types} - {None}
        if len(kinds) > 1:
            raise DistscopeError(f"{path}: layer_types={_show(types)} mixes sliding and chunked layers; distscope "
                                 "prices one local kind per model")
        if not kinds:
            return None
        lk = kinds.pop()
        assert lk is not None
        return LocalAttention(kind=lk, size=_req(cfg, path, _SIZE_FIELD[lk]),
                              layers=sum(_LAYER_KINDS[t] is lk for t in types))
    if kind in ("mistral", "mixtral", "gpt_oss"):
        w = _int(cfg, path, "sliding_window")
        n = layers if kind != "gpt_oss" else (layers + 1) // 2
        return None if w is None else LocalAttention(kind=LocalKind.SLIDING, size=w, layers=n)
    if kind in ("qwen2", "qwen3", "qwen3_moe") and _flag(cfg, path, "use_sliding_window", False):
        w = _req(cfg, path, "sliding_window")
        first = 0 if cfg.get("max_window_layers") == 0 else _opt(cfg, path, "max_window_layers", layers)
        return LocalAttention(kind=LocalKind.SLIDING, size=w, layers=layers - first) if first < layers else None
    if kind == "llama4_text" and _int(cfg, path, "attention_chunk_size") is not None:
        flags = cfg.get("no_rope_layers")
        if flags:
            if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) for f in flags):
                raise DistscopeError(f"{path}: no_rope_layers={_show(flags)} must list 0 or 1 for each of the "
                                     f"{layers} layers")
            n = sum(flags)
        else:
            n = layers - layers // _opt(cfg, path, "no_rope_layer_interval", 4)
        return LocalAttention(kind=LocalKind.CHUNKED, size=_req(cfg, path, "attention_chunk_size"), layers=n) if n else None
    return None
