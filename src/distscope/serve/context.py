"""The context window of a model (prompt + output tokens a request may hold), where it is known.

Learned-position models stop at their position table. For RoPE/ALiBi catalog models the window is the
catalog's `max_positions` (their config.json's `max_position_embeddings`); a Hugging Face config path
is read for it. Unknown windows are not checked.
"""

from __future__ import annotations

import json
from pathlib import Path

from distscope.errors import DistscopeError, warn
from distscope.workload.spec import ModelSpec


def context_len(spec: ModelSpec, model_arg: str = "") -> int | None:
    if spec.max_positions:  # the position table, or the catalog's context window (workload/data/models.json)
        return spec.max_positions
    p = Path(model_arg) if model_arg else None
    if p is not None and (p.suffix == ".json" or p.is_dir()):
        cfg = p / "config.json" if p.is_dir() else p
        try:
            v = json.loads(cfg.read_text()).get("max_position_embeddings")
        except (OSError, json.JSONDecodeError):
            return None
        return int(v) if v else None
    return None


def check_lengths(spec: ModelSpec, input_len: int, output_len: int, window: int | None) -> None:
    if spec.linear_mixer is not None:
        lm = spec.linear_mixer
        raise DistscopeError(f"model {spec.name}: serving its {lm.layers} {lm.kind.value} layers is not modelled (a "
                             "fixed recurrent state replaces their KV cache); `distscope estimate` and `plan` price their training")
    if spec.compressed_attention is not None:
        raise DistscopeError(f"model {spec.name}: serving DeepSeek-V4's compressed attention (CSA/HCA) is not "
                             "modelled; `distscope estimate` and `plan` price its training")
    if spec.sparse_attention is not None:  # decode reads min(ctx, topk) latent entries plus every indexer key
        raise DistscopeError(f"model {spec.name}: serving DeepSeek Sparse Attention (top-{spec.sparse_attention.topk} "
                             "keys chosen by its indexer) is not modelled; `distscope estimate` and `plan` price its "
                             "training")
    if spec.moe is not None and spec.moe.latent:
        raise DistscopeError(f"model {spec.name}: serving LatentMoE (latent={spec.moe.latent}) is not modelled; "
                             "`distscope estimate` and `plan` price its training")
    if input_len < 1:
        raise DistscopeError(f"input_len={input_len} must be >= 1")
    if output_len < 1:
        raise DistscopeError(f"output_len={output_len} must be >= 1")
    if window is not None and input_len >= window:
        raise DistscopeError(f"input_len={input_len} is beyond model {spec.name}'s context of {window} tokens")
    if window is not None and input_len + output_len > window:
        raise DistscopeError(f"input_len + output_len = {input_len + output_len} exceeds model {spec.name}'s "
                             f"context of {window} tokens (input_len={input_len}, output_len={output_len})")
    band = spec.local_attention
    if band is not None and input_len + output_len > band.size:
        warn(f"model {spec.name}: its {band.layers} {band.kind.value}-attention layers ({band.size} tokens) are served "
             "as full attention here (KV cache and decode reads over the whole context, an over-estimate); the "
             "training verbs price them as local")
