"""The built-in model catalog (data/models.json), keyed by lowercase names like `llama3-70b`."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError, closest
from distscope.workload.embedding import is_dlrm_ref
from distscope.workload.spec import (
    CompressedAttention,
    FfnKind,
    LinearMixer,
    LocalAttention,
    LocalKind,
    MixerKind,
    MLASpec,
    ModelSpec,
    MoESpec,
    NormKind,
    PositionKind,
    SparseAttention,
)


def spec_from_dict(name: str, d: dict[str, Any]) -> ModelSpec:
    """Build a ModelSpec from the catalog's JSON shape (strings become enums here, once)."""
    d = dict(d)
    try:
        d["ffn"] = FfnKind(d["ffn"])
        d["position"] = PositionKind(d.get("position", "rope"))
        d["norm"] = NormKind(d.get("norm", "rmsnorm"))
    except ValueError as exc:
        raise DistscopeError(f"model {name}: {exc}") from None
    if d.get("moe"):
        d["moe"] = MoESpec(**d["moe"])
    if d.get("mla"):
        d["mla"] = MLASpec(**d["mla"])
    if d.get("local_attention"):
        la = dict(d["local_attention"])
        try:
            la["kind"] = LocalKind(la["kind"])
        except ValueError as exc:
            raise DistscopeError(f"model {name}: local_attention.kind: {exc}") from None
        d["local_attention"] = LocalAttention(**la)
    if d.get("linear_mixer"):
        lm = dict(d["linear_mixer"])
        try:
            lm["kind"] = MixerKind(lm["kind"])
        except ValueError as exc:
            raise DistscopeError(f"model {name}: linear_mixer.kind: {exc}; valid: "
                                 f"{', '.join(k.value for k in MixerKind)}") from None
        d["linear_mixer"] = LinearMixer(**lm)
    if d.get("sparse_attention"):
        d["sparse_attention"] = SparseAttention(**d["sparse_attention"])
    if d.get("compressed_attention"):
        d["compressed_attention"] = CompressedAttention(**d["compressed_attention"])
    return ModelSpec(name=name, **d)


@functools.cache
def _catalog() -> dict[str, ModelSpec]:
    text = resources.files("distscope.workload").joinpath("data/models.json").read_text()
    return {k: spec_from_dict(k, v) for k, v in json.loads(text).items()}


def model_names() -> list[str]:
    return list(_catalog())


def get_model(name: str) -> ModelSpec:
    """A catalog model by key, or a Hugging Face config.json path."""
    if name.startswith(("torch:", "torchvision:", "timm:")):
        raise DistscopeError(f"--model {name}: a torch module is priced by `distscope estimate`, planned by "
                             "`distscope plan`, swept by `distscope explore` and traced by `distscope trace generate` "
                             "(with --input); the other verbs take transformer models (catalog keys or config.json)")
    if is_dlrm_ref(name):
        raise DistscopeError(f"--model {name}: a recommendation model is priced by `distscope estimate` and sharded "
                             "by `distscope plan`; the other verbs take transformer models")
    if name.endswith(".json") or Path(name).is_dir():
        from distscope.workload.hf import load_hf_config

        return load_hf_config(name)
    key = name.strip().lower()
    try:
        return _catalog()[key]
    except KeyError:
        raise DistscopeError(f"model={name!r} is not in the catalog{closest(key, _catalog())}") from None
