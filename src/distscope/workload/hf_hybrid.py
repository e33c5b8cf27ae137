"""Hugging Face `config.json` of hybrid models, whose token mixer is a linear recurrence in some layers
(ModelSpec.linear_mixer): Qwen3-Next and Qwen3.5 (Gated DeltaNet; `qwen3_next`, `qwen3_5_text`,
`qwen3_5_moe_text`, and the `qwen3_5` / `qwen3_5_moe` wrappers through their `text_config`) and Nemotron-H /
Nemotron 3 (Mamba-2; `nemotron_h`).

- Qwen3-Next / Qwen3.5 (transformers' Qwen3NextConfig): `layer_types` lists "linear_attention" or
  "full_attention" per layer, else every `full_attention_interval`-th layer (default 4) is full
  attention. The Gated DeltaNet is `linear_num_value_heads` × `linear_value_head_dim` wide with
  `linear_num_key_heads` × `linear_key_head_dim` keys and a `linear_conv_kernel_dim` conv; attention has an
  output gate (`attn_output_gate`, on in Qwen3-Next). MoE: `num_experts`, `num_experts_per_tok`,
  `moe_intermediate_size`, and one shared expert of `shared_expert_intermediate_size` (counted in experts
  of the routed width).
- Nemotron-H (NemotronHConfig): `hybrid_override_pattern` (or `layers_block_type`) gives one block per
  character: M Mamba-2, * attention, - squared-ReLU MLP, E MoE. The model's layers are its FFN blocks (- and
  E, the MLP ones counted as dense layers) and its mixers are the M and * blocks (LinearMixer, which keeps the
  order as its `pattern` for Megatron's --hybrid-layer-pattern). Mamba-2:
  `mamba_num_heads` × `mamba_head_dim`, `n_groups` × `ssm_state_size`, `conv_kernel`, `chunk_size`.
  Attention has no positional encoding. LatentMoE's `moe_latent_size` becomes MoESpec.latent;
  `num_nextn_predict_layers` (Nemotron 3's MTP block) the MTP depth, priced as a mean layer.
A field read here is checked as hf.py checks every field; a bad one is one line naming it.
"""

from __future__ import annotations

from typing import Any

from distscope.errors import DistscopeError
from distscope.workload.hf_moe import _count
from distscope.workload.spec import FfnKind, LinearMixer, MixerKind, ModelSpec, MoESpec, NormKind, PositionKind

QWEN = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
WRAPPERS = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
FAMILIES = (*QWEN, "nemotron_h")
_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_SYMBOL = {b: c for c, b in _BLOCKS.items()}


def load_hybrid(cfg: dict[str, Any], path: str, kind: str, name: str, source: str) -> ModelSpec:
    """The ModelSpec of one of FAMILIES (module docstring); a shape the spec refuses (e.g. value heads not a
    multiple of key heads) is one line naming the file and the fields it came from."""
    try:
        return _load(cfg, path, kind, name, source)
    except DistscopeError as exc:
        text = str(exc)
        if text.startswith(path):
            raise
        fields = ("mamba_num_heads, mamba_head_dim, n_groups, ssm_state_size, n_routed_experts, num_experts_per_tok"
                  if kind == "nemotron_h" else "linear_num_value_heads, linear_num_key_heads, num_experts, "
                  "num_experts_per_tok")
        raise DistscopeError(f"{path}: {text} (from {fields})") from None


def _load(cfg: dict[str, Any], path: str, kind: str, name: str, source: str) -> ModelSpec:
    from distscope.workload.hf import _flag as flag
    from distscope.workload.hf import _int as int_
    from distscope.workload.hf import _opt as opt
    from distscope.workload.hf import _req as req

    heads = req(cfg, path, "num_attention_heads")
    common: dict[str, Any] = dict(
        name=name, hidden=req(cfg, path, "hidden_size"), heads=heads,
        kv_heads=opt(cfg, path, "num_key_value_heads", heads), vocab=req(cfg, path, "vocab_size"),
        head_dim=opt(cfg, path, "head_dim", opt(cfg, path, "attention_head_dim", 0)),
        max_positions=int_(cfg, path, "max_position_embeddings") or 0, source=source,
        tied_embeddings=flag(cfg, path, "tie_word_embeddings", False), norm=NormKind.RMSNORM, bias=False,
    )
    if kind == "nemotron_h":
        blocks = _nemotron_blocks(cfg, path)
        n = {b: blocks.count(b) for b in _BLOCKS.values()}
        layers = n["mlp"] + n["moe"]
        if not layers or not n["mamba"]:
            raise DistscopeError(f"{path}: the block pattern has {n['mlp'] + n['moe']} MLP/MoE and {n['mamba']} "
                                 "Mamba-2 blocks; a hybrid needs at least one of each")
        mixer = LinearMixer(kind=MixerKind.MAMBA2, layers=n["mamba"], attention_layers=n["attention"],
                            heads=req(cfg, path, "mamba_num_heads"), head_dim=req(cfg, path, "mamba_head_dim"),
                            key_heads=req(cfg, path, "n_groups"), key_dim=req(cfg, path, "ssm_state_size"),
                            conv_kernel=opt(cfg, path, "conv_kernel", 4), chunk=opt(cfg, path, "chunk_size", 128),
                            separate_blocks=True, pattern="".join(_SYMBOL[b] for b in blocks))
        moe = None
        if n["moe"]:
            width = req(cfg, path, "moe_intermediate_size")
            n_shared = _count(cfg, path, "n_shared_experts")
            if n_shared > 1:  # NemotronHMoE builds one shared MLP of moe_shared_expert_intermediate_size
                raise DistscopeError(f"{path}: n_shared_experts={n_shared}: Nemotron-H builds one shared expert "
                                     "(of moe_shared_expert_intermediate_size); distscope reads 0 or 1")
            shared = opt(cfg, path, "moe_shared_expert_intermediate_size", width) if n_shared else 0
            moe = MoESpec(experts=req(cfg, path, "n_routed_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                          expert_ffn_hidden=width, shared_experts=_in_widths(path, shared, width,
                                                                             "moe_shared_expert_intermediate_size"),
                          dense_layers=n["mlp"], latent=int_(cfg, path, "moe_latent_size") or 0)
        if n["mlp"]:
            ffn = req(cfg, path, "intermediate_size")
        else:
            assert moe is not None
            ffn = opt(cfg, path, "intermediate_size", moe.expert_ffn_hidden)
        return ModelSpec(**common, layers=layers, ffn_hidden=ffn, ffn=FfnKind.RELU2, position=PositionKind.NONE,
                         moe=moe, linear_mixer=mixer, mtp_layers=_count(cfg, path, "num_nextn_predict_layers"))
    layers = req(cfg, path, "num_hidden_layers")
    full = _qwen_full_layers(cfg, path, layers)
    if full == layers:
        why = "layer_types lists" if "layer_types" in cfg else f"full_attention_interval={cfg.get('full_attention_interval')} leaves"
        raise DistscopeError(f"{path}: {why} no linear_attention layer; not a hybrid")
    mixer = LinearMixer(kind=MixerKind.GATED_DELTANET, layers=layers - full, attention_layers=full,
                        heads=req(cfg, path, "linear_num_value_heads"), head_dim=req(cfg, path, "linear_value_head_dim"),
                        key_heads=req(cfg, path, "linear_num_key_heads"), key_dim=req(cfg, path, "linear_key_head_dim"),
                        conv_kernel=opt(cfg, path, "linear_conv_kernel_dim", 4), chunk=64)
    moe = None
    if kind != "qwen3_5_text":
        step, dense = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers", [])
        if isinstance(step, bool) or step != 1 or not isinstance(dense, list) or dense:
            raise DistscopeError(f"{path}: decoder_sparse_step={cfg.get('decoder_sparse_step')!r} / mlp_only_layers="
                                 f"{cfg.get('mlp_only_layers')!r} place dense layers among MoE ones; not modelled "
                                 "(need 1 and [])")
        width = req(cfg, path, "moe_intermediate_size")
        moe = MoESpec(experts=req(cfg, path, "num_experts"), top_k=req(cfg, path, "num_experts_per_tok"),
                      expert_ffn_hidden=width,
                      shared_experts=_in_widths(path, _count(cfg, path, "shared_expert_intermediate_size"), width,
                                                "shared_expert_intermediate_size"))
    ffn = opt(cfg, path, "intermediate_size", moe.expert_ffn_hidden if moe else 0)
    if not ffn:
        raise DistscopeError(f"{path}: missing field intermediate_size")
    return ModelSpec(**common, layers=layers, ffn_hidden=ffn, ffn=FfnKind.SWIGLU, position=PositionKind.ROPE,
                     moe=moe, linear_mixer=mixer, attention_gate=flag(cfg, path, "attn_output_gate", True))


def _nemotron_blocks(cfg: dict[str, Any], path: str) -> list[str]:
    """One block kind per layer from `layers_block_type` (a list) or `hybrid_override_pattern` (a string)."""
    from distscope.workload.hf import _show as show

    listed = cfg.get("layers_block_type")
    if listed is not None:
        if not isinstance(listed, list) or not listed or any(b not in _BLOCKS.values() for b in listed):
            raise DistscopeError(f"{path}: layers_block_type={show(listed)} must list one of "
                                 f"{', '.join(_BLOCKS.values())} per block")
        return list(listed)
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern or any(c not in _BLOCKS for c in pattern):
        raise DistscopeError(f"{path}: hybrid_override_pattern={show(pattern)} must be a string of "
                             f"{', '.join(f'{c} ({b})' for c, b in _BLOCKS.items())}")
    return [_BLOCKS[c] for c in pattern]


def _qwen_full_layers(cfg: dict[str, Any], path: str, layers: int) -> int:
    """Layers of full attention: from `layer_types`, else every `full_attention_interval`-th."""
    from distscope.workload.hf import _opt as opt
    from distscope.workload.hf import _show as show

    types = cfg.get("layer_types")
    if types is not None:
        kinds = ("linear_attention", "full_attention")
        if not isinstance(types, list) or len(types) != layers or any(t not in kinds for t in types):
            raise DistscopeError(f"{path}: layer_types={show(types)} must list one of {', '.join(kinds)} for each "
                                 f"of the {layers} layers")
        return types.count("full_attention")
    return layers // opt(cfg, path, "full_attention_interval", 4)


def _in_widths(path: str, width: int, unit: int, field: str) -> int:
    """A shared expert's width as a count of routed-width experts (FLOPs and weights are linear in it)."""
    if width % unit:
        raise DistscopeError(f"{path}: {field}={width} is not a multiple of the routed experts' width {unit}; "
                             "distscope counts shared experts in routed widths")
    return width // unit
