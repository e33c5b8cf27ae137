"""Hybrid models with linear-recurrence mixers (ModelSpec.linear_mixer: Mamba-2, Gated DeltaNet): their
parameters against published checkpoints, their import from Hugging Face configs, their cost in a layer,
and the verbs that refuse what they do not model."""

import dataclasses
import json
from pathlib import Path

import pytest

from distscope.dtypes import Precision, Scaling
from distscope.errors import DistscopeError
from distscope.model import linear_mixer
from distscope.model.layer import Mixer, _mixer_layer_cost, layer_cost
from distscope.plan import AttentionImpl, Plan, Recompute
from distscope.serve.context import check_lengths
from distscope.system.device import get_device
from distscope.system.presets import get_cluster
from distscope.trace.from_plan import step_spec
from distscope.workload import get_model
from distscope.workload.params import active_params, linear_mixer_params, total_params
from distscope.workload.spec import LinearMixer, MixerKind
from distscope.workload.training import TrainingShape

H100 = get_device("h100-sxm5-80gb")

# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json
NANO = {
    "model_type": "nemotron_h", "chunk_size": 128, "conv_kernel": 4, "expand": 2, "head_dim": 128, "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "intermediate_size": 1856,
    "mamba_head_dim": 64, "mamba_num_heads": 64, "max_position_embeddings": 262144, "mlp_hidden_act": "relu2",
    "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "n_groups": 8,
    "n_routed_experts": 128, "n_shared_experts": 1, "num_attention_heads": 32, "num_experts_per_tok": 6,
    "num_hidden_layers": 52, "num_key_value_heads": 2, "ssm_state_size": 128, "tie_word_embeddings": False,
    "vocab_size": 131072,
}
# Qwen/Qwen3-Next-80B-A3B config.json (its architecture fields)
QWEN3_NEXT = {
    "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48, "vocab_size": 151936, "head_dim": 256,
    "num_attention_heads": 16, "num_key_value_heads": 2, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "linear_num_key_heads": 16,
    "linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "tie_word_embeddings": False,
    "intermediate_size": 5120, "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 262144,
}


def _write(tmp_path: Path, cfg: dict, name: str = "m") -> str:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _same(a, b) -> bool:
    skip = {"name", "source", "official_params", "official_params_precision"}
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return {k: v for k, v in da.items() if k not in skip} == {k: v for k, v in db.items() if k not in skip}


def test_parameters_match_the_checkpoints() -> None:
    """Qwen3-Next-80B-A3B's checkpoint holds 79,674,391,296 parameters (without its MTP module); the only
    tensors not modelled are its 12 attention layers' q/k norms (2 x 256 each) and its 48 shared experts'
    sigmoid gates (2048 each). Nemotron 3 Nano's model card: 31.6B total, 3.6B active with embeddings."""
    qn = get_model("qwen3-next-80b-a3b")
    assert total_params(qn) == 79_674_391_296 - 12 * 2 * 256 - 48 * 2048
    nano = get_model("nemotron-3-nano-30b-a3b")
    assert total_params(nano) == pytest.approx(31.6e9, abs=0.05e9)
    assert active_params(nano) == pytest.approx(3.6e9, abs=0.05e9)


def test_one_gated_deltanet_layer_has_the_transformers_shapes() -> None:
    """Qwen3NextGatedDeltaNet: in_proj_qkvz h x (2·16·128 + 2·32·128), in_proj_ba h x 64, conv1d 8192 x 4 (no
    bias), dt_bias and A_log 32 each, norm 128, out_proj 4096 x h."""
    h = 2048
    want = h * 12288 + h * 64 + 8192 * 4 + 64 + 128 + 4096 * h
    assert linear_mixer_params(get_model("qwen3-next-80b-a3b")) == want


def test_hf_configs_import_as_the_catalog_entries(tmp_path: Path) -> None:
    assert _same(get_model(_write(tmp_path, NANO, "nano")), get_model("nemotron-3-nano-30b-a3b"))
    assert _same(get_model(_write(tmp_path, QWEN3_NEXT, "qn")), get_model("qwen3-next-80b-a3b"))
    listed = dict(NANO, layers_block_type=[{"M": "mamba", "E": "moe", "*": "attention"}[c]
                                           for c in NANO["hybrid_override_pattern"]])
    del listed["hybrid_override_pattern"]
    assert _same(get_model(_write(tmp_path, listed, "listed")), get_model("nemotron-3-nano-30b-a3b"))
    types = dict(QWEN3_NEXT, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 12)
    assert _same(get_model(_write(tmp_path, types, "types")), get_model("qwen3-next-80b-a3b"))
    wrapped = {"model_type": "qwen3_5_moe", "text_config": dict(QWEN3_NEXT, model_type="qwen3_5_moe_text")}
    spec = get_model(_write(tmp_path, wrapped, "wrapped"))
    assert spec.linear_mixer is not None and spec.linear_mixer.layers == 36 and spec.attention_gate


def test_nemotron_h_counts_ffn_blocks_as_layers(tmp_path: Path) -> None:
    """Nemotron-H-8B's 52 blocks: 24 Mamba-2, 4 attention, 24 MLP -> 24 dense layers with 28 mixers."""
    cfg = dict(NANO, hybrid_override_pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
               intermediate_size=21504, hidden_size=4096, num_key_value_heads=8, mamba_num_heads=128)
    for k in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
              "n_shared_experts"):
        del cfg[k]
    spec = get_model(_write(tmp_path, cfg))
    assert spec.layers == 24 and spec.moe is None and spec.ffn_hidden == 21504
    assert spec.linear_mixer == LinearMixer(kind=MixerKind.MAMBA2, layers=24, attention_layers=4, heads=128,
                                            head_dim=64, key_heads=8, key_dim=128, conv_kernel=4, chunk=128,
                                            separate_blocks=True, pattern=cfg["hybrid_override_pattern"])
    assert spec.linear_mixer == get_model("nemotron-h-8b").linear_mixer  # the catalog keeps the same block order


@pytest.mark.parametrize(("change", "field"), [
    ({"hybrid_override_pattern": "MEX*"}, "hybrid_override_pattern"),
    ({"hybrid_override_pattern": 7}, "hybrid_override_pattern"),
    ({"hybrid_override_pattern": "M*M*"}, "MLP/MoE"),
    ({"moe_latent_size": -4}, "moe_latent_size"),
    ({"mamba_num_heads": 0}, "mamba_num_heads"),
    ({"n_groups": 3}, "key_heads"),
    ({"moe_shared_expert_intermediate_size": 1000}, "moe_shared_expert_intermediate_size"),
    ({"n_shared_experts": "two"}, "n_shared_experts"),
    ({"n_shared_experts": True}, "n_shared_experts"),
    ({"n_shared_experts": 2}, "n_shared_experts"),
    ({"layers_block_type": ["mamba", 1]}, "layers_block_type"),
])
def test_bad_nemotron_fields_are_one_line(tmp_path: Path, change: dict, field: str) -> None:
    with pytest.raises(DistscopeError, match=field) as e:
        get_model(_write(tmp_path, dict(NANO, **change)))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("change", "field"), [
    ({"layer_types": ["linear_attention"] * 47}, "layer_types"),
    ({"layer_types": ["full_attention"] * 48}, "layer_types"),
    ({"mlp_only_layers": [3]}, "mlp_only_layers"),
    ({"linear_num_value_heads": 30}, "key_heads"),
    ({"decoder_sparse_step": True}, "decoder_sparse_step"),
    ({"mlp_only_layers": {}}, "mlp_only_layers"),
    ({"full_attention_interval": 1}, "full_attention_interval=1"),
    ({"shared_expert_intermediate_size": -512}, "shared_expert_intermediate_size"),
])
def test_bad_qwen3_next_fields_are_one_line(tmp_path: Path, change: dict, field: str) -> None:
    with pytest.raises(DistscopeError, match=field) as e:
        get_model(_write(tmp_path, dict(QWEN3_NEXT, **change)))
    assert "\n" not in str(e.value)


def _cost(spec, mixer: Mixer, s: int, tp: int = 1):
    return _mixer_layer_cost(spec, False, 1, s, tp, 1, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16,
                             H100, 0, 1.0, False, Scaling.NONE, 0, mixer)


def test_scan_flops_by_hand() -> None:
    """Nemotron-H-8B's SSD per token (Q 128, N 128, P 64, 128 heads, 8 groups):
    2·(128·128·8 + 128·64·128 + 2·128·64·128) = 6,553,600; Qwen3-Next's Gated DeltaNet (Q 64, N = P = 128,
    32 value heads): 2·32·(3·64·128 + 2·64·128 + 3·128·128) = 5,767,168."""
    assert linear_mixer.scan_flops(get_model("nemotron-h-8b").linear_mixer, 4096, 1) == 4096 * 6_553_600
    assert linear_mixer.scan_flops(get_model("qwen3-next-80b-a3b").linear_mixer, 4096, 1) == 4096 * 5_767_168
    assert linear_mixer.scan_flops(get_model("nemotron-h-8b").linear_mixer, 4096, 2) == 4096 * 6_553_600 / 2


def test_activations_of_a_hybrid_layer() -> None:
    """Without recompute a Mamba-2 mixer keeps its projection's output, the conv's output, the scan's output,
    the gated norm's output and fp32 chunk states, per token: Nemotron-H-8B 2·(18,560 + 8,192 + 2,048 + 8,192)
    + 2·8,192 + 4·128·128·64/128 = 123,136 bytes. Every term is per token under fused attention, so doubling
    the sequence doubles a layer's activations; full recompute keeps one input per block (Nano: 52 blocks
    over 23 layers)."""
    from distscope.model.memory import activation_bytes_per_layer

    lm = get_model("nemotron-h-8b").linear_mixer
    assert linear_mixer.activation_bytes(lm, 1, 1, 2, 2) == 123_136
    spec = get_model("nemotron-h-8b")
    plan = Plan(dp=8)
    assert activation_bytes_per_layer(spec, False, 1, 8192, plan) == pytest.approx(
        2 * activation_bytes_per_layer(spec, False, 1, 4096, plan), rel=1e-12)
    nano = get_model("nemotron-3-nano-30b-a3b")
    full = Plan(dp=8, recompute=Recompute.FULL)
    assert activation_bytes_per_layer(nano, True, 1, 4096, full) == pytest.approx(2 * 4096 * 2688 * 52 / 23)


def test_estimate_refuses_what_it_does_not_price() -> None:
    """Whatever path reaches the estimator (a CSV row, the API): CP, a TP degree the mixer's heads or groups do
    not divide, and torchtitan's per-op checkpointing are one line."""
    from distscope.model.estimate import estimate

    spec, cluster = get_model("nemotron-h-8b"), get_cluster("dgx-h100", 16)
    shape = TrainingShape(global_batch=16, seq_len=4096)
    for plan, what in ((Plan(dp=8, cp=2), "cp=2"), (Plan(dp=1, tp=16), "tp=16"),
                       (Plan(dp=16, recompute=Recompute.SELECTIVE_OP), "selective-op")):
        with pytest.raises(DistscopeError, match=what):
            estimate(spec, shape, cluster, plan)


def test_a_linear_mixer_adds_its_projections_and_scan_flops() -> None:
    """The mixer's FLOPs over an FFN-only block: 2·T·(in + out projection weights) forward, three times over
    forward and backward, and the chunked scan's own (linear_mixer.scan_flops), counted from the shapes."""
    spec = get_model("nemotron-h-8b")
    m = spec.linear_mixer
    T = 4096
    proj = spec.hidden * (2 * m.width + 2 * m.key_width + m.heads) + m.width * spec.hidden
    extra = _cost(spec, Mixer.LINEAR, T).model_flops - _cost(spec, Mixer.NONE, T).model_flops
    assert extra == pytest.approx(3 * (2 * T * proj + linear_mixer.scan_flops(m, T, 1)), rel=1e-9)


def test_a_linear_mixer_grows_linearly_with_the_sequence_and_attention_does_not() -> None:
    """Per token, a Mamba-2 mixer's time is flat in the sequence (the scan works chunk by chunk) while
    causal attention's grows with it. Nemotron-H-56B's Mamba-2 projections (8192 -> 37,120) are wider than its
    attention's (8192 -> 10,240), so at 4k a Mamba-2 mixer costs more than an attention one, and at 32k less."""
    spec = get_model("nemotron-h-56b")

    def per_token(mixer: Mixer, s: int) -> float:
        c, f = _cost(spec, mixer, s), _cost(spec, Mixer.NONE, s)
        return (c.fwd_s + c.bwd_s - f.fwd_s - f.bwd_s) / s

    assert per_token(Mixer.LINEAR, 32768) == pytest.approx(per_token(Mixer.LINEAR, 4096), rel=0.05)
    assert per_token(Mixer.ATTENTION, 32768) > 2 * per_token(Mixer.ATTENTION, 4096)
    assert per_token(Mixer.LINEAR, 4096) > per_token(Mixer.ATTENTION, 4096)
    assert per_token(Mixer.ATTENTION, 32768) > 1.5 * per_token(Mixer.LINEAR, 32768)


def test_the_layer_is_the_mean_over_the_blocks() -> None:
    """Nemotron 3 Nano's 29 mixers over 23 MoE blocks: its layer's FLOPs sum 6 attention and 23 Mamba-2
    mixers and 23 MoE blocks, over 23."""
    spec = get_model("nemotron-3-nano-30b-a3b")
    args = (spec, True, 1, 4096, 1, 1, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16, H100, 0, 1.0,
            False, Scaling.NONE, 8)
    whole = layer_cost(*args)
    parts = {m: _mixer_layer_cost(*args, m) for m in (Mixer.ATTENTION, Mixer.LINEAR, Mixer.NONE)}
    moe = parts[Mixer.NONE].model_flops
    mixers = 6 * (parts[Mixer.ATTENTION].model_flops - moe) + 23 * (parts[Mixer.LINEAR].model_flops - moe)
    assert whole.model_flops == pytest.approx((mixers + 23 * moe) / 23, rel=1e-12)


def test_layouts_a_recurrence_cannot_run_are_refused() -> None:
    m = get_model("nemotron-h-8b").linear_mixer
    assert m.refusal(8, 1) is None
    assert "tp=16" in m.refusal(16, 1)  # n_groups = 8
    assert "cp=2" in m.refusal(1, 2)


def test_verbs_that_do_not_model_hybrids_say_so() -> None:
    spec = get_model("nemotron-h-8b")
    with pytest.raises(DistscopeError, match="serving its 24 mamba2 layers"):
        check_lengths(spec, 128, 128, None)
    plan = Plan(dp=8)
    with pytest.raises(DistscopeError, match=r"does not model linear-mixer layers \(mamba2\)"):
        step_spec(spec, TrainingShape(global_batch=16, seq_len=4096), get_cluster("dgx-h100", 8), plan)


def test_a_row_may_count_megatrons_blocks(tmp_path: Path) -> None:
    """arch=catalog rows of a Nemotron-H model may give `layers` as its FFN layers or Megatron's --num-layers
    (its mixer and FFN blocks); anything else names both."""
    from distscope.validate.rows import parse_row

    spec = get_model("nemotron-3-nano-30b-a3b")
    assert spec.blocks == 52 and get_model("qwen3-next-80b-a3b").blocks == 48
    row = {"run_id": "r", "source": "s", "model": "nemotron-3-nano-30b-a3b", "arch": "catalog", "params_B": "31.6",
           "hidden": "2688", "heads": "32", "kv_heads": "2", "ffn_hidden": "1856", "ffn_act": "relu2", "vocab": "131072",
           "seq_len": "8192", "global_batch": "512", "micro_batch": "2", "tp": "1", "pp": "1", "vp": "1", "dp": "8",
           "cp": "1", "ep": "8", "sequence_parallel": "0", "zero_stage": "0", "distributed_optimizer": "1",
           "overlap": "auto", "recompute": "auto", "precision": "bf16", "gpu": "b200-sxm-180gb", "num_gpus": "8",
           "gpus_per_node": "8", "intra_node_GBps": "900", "inter_node_GBps_per_gpu": "50", "framework": "f",
           "measured_step_time_s": "10", "step_time_basis": "x", "reported": "x", "notes": "x"}
    for layers in ("23", "52"):
        assert parse_row(dict(row, layers=layers), 2).spec == spec
    with pytest.raises(DistscopeError, match="layers=23, or its 52 mixer and FFN blocks"):
        parse_row(dict(row, layers="50"), 2)


def test_host_ops_count_each_block() -> None:
    """Half of a transformer layer's DENSE_LAYER_OPS sit in its attention block and half in its FFN block;
    a linear mixer issues MIXER_OPS. Nemotron-H-8B's mean layer: 4/24 attention blocks, one Mamba-2 mixer,
    one MLP; Qwen3-Next's: 1/4 attention, 3/4 Gated DeltaNet, one MoE block."""
    from distscope.model import host

    assert host.layer_ops(get_model("llama3-8b")) == host.DENSE_LAYER_OPS
    half = host.DENSE_LAYER_OPS / 2
    assert host.layer_ops(get_model("nemotron-h-8b")) == pytest.approx(half * (1 + 4 / 24) + host.MIXER_OPS)
    assert host.layer_ops(get_model("qwen3-next-80b-a3b")) == pytest.approx(half * 1.25 + host.MIXER_OPS * 0.75)
    assert host.linear_layers(get_model("qwen3-next-80b-a3b"), True) == pytest.approx(2 * 0.25 + 2 * 0.75 + 2 + 2)
