"""The context window of a model (prompt + output tokens a request may hold), where it is known.

Learned-position models stop at their position table. For RoPE/ALiBi catalog models the window is the
one their config.json declares (`max_position_embeddings`); a Hugging Face config path is read for it.
Unknown windows are not checked.
"""

from __future__ import annotations

import json
from pathlib import Path

from distscope.errors import DistscopeError
from distscope.workload.spec import ModelSpec, PositionKind

# config.json max_position_embeddings (Llama 2: 4096; Llama 3: 8192; Llama 3.1: 131072; Mixtral: 32768;
# DeepSeek-V3: 163840; Nemotron-4: 4096 (paper, Sec. 2); BLOOM: 2048 training sequence, ALiBi)
CONTEXT: dict[str, int] = {
    "llama2-7b": 4096, "llama2-13b": 4096, "llama2-70b": 4096, "llama3-8b": 8192, "llama3-70b": 8192,
    "llama3.1-8b": 131072, "llama3.1-70b": 131072, "llama3.1-405b": 131072, "mixtral-8x7b": 32768,
    "deepseek-v3": 163840, "nemotron4-15b": 4096, "nemotron4-340b": 4096, "bloom-176b": 2048,
}


def context_len(spec: ModelSpec, model_arg: str = "") -> int | None:
    if spec.position is PositionKind.LEARNED:
        return spec.max_positions
    if spec.name in CONTEXT:
        return CONTEXT[spec.name]
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
    if input_len < 1:
        raise DistscopeError(f"input_len={input_len} must be >= 1")
    if output_len < 1:
        raise DistscopeError(f"output_len={output_len} must be >= 1")
    if window is not None and input_len >= window:
        raise DistscopeError(f"input_len={input_len} is beyond model {spec.name}'s context of {window} tokens")
    if window is not None and input_len + output_len > window:
        raise DistscopeError(f"input_len + output_len = {input_len + output_len} exceeds model {spec.name}'s "
                             f"context of {window} tokens (input_len={input_len}, output_len={output_len})")
