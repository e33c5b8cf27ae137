"""LatentMoE (MoESpec.latent, Megatron-Core's moe_latent_size): tokens are projected to the latent width
before dispatch and back after combine, and the routed experts compute at that width."""

import dataclasses
import json
from pathlib import Path

import pytest

from distscope.comm import group_net
from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.model.layer import layer_cost
from distscope.model.moe import deepep_bytes, moe_pass_comm_s
from distscope.plan import AttentionImpl, Plan, Recompute
from distscope.serve.context import check_lengths
from distscope.system.device import get_device
from distscope.system.presets import get_cluster
from distscope.workload import get_model
from distscope.workload.params import active_params, total_params

# nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16 config.json (architecture fields)
SUPER = {
    "model_type": "nemotron_h", "hidden_size": 4096, "num_hidden_layers": 88, "vocab_size": 131072,
    "hybrid_override_pattern": "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
    "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
    "chunk_size": 128, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "n_routed_experts": 512,
    "n_shared_experts": 1, "num_experts_per_tok": 22, "moe_latent_size": 1024, "moe_intermediate_size": 2688,
    "moe_shared_expert_intermediate_size": 5376, "mlp_hidden_act": "relu2", "tie_word_embeddings": False,
    "max_position_embeddings": 1048576,
}


def test_super_matches_its_checkpoint() -> None:
    """The checkpoint's 123,611,012,096 BF16 weights less its 2,942,324,736-parameter MTP module; 12,770,216,960
    active (the routed experts' 22 of 512 and everything else)."""
    spec = get_model("nemotron-3-super-120b-a12b")
    assert total_params(spec) == 123_611_012_096 - 2_942_324_736
    assert active_params(spec) == 12_770_216_960


def test_the_hf_config_imports_as_the_catalog_entry(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SUPER))
    got, want = get_model(str(tmp_path)), get_model("nemotron-3-super-120b-a12b")
    assert got.moe == want.moe and got.linear_mixer == want.linear_mixer and got.layers == want.layers


def test_tokens_travel_at_the_latent_width() -> None:
    """The dispatch and combine move latent/hidden of the bytes the same experts would at the hidden width; a
    quarter of the bytes takes a little over a quarter of the time (smaller messages run at lower efficiency)."""
    spec = get_model("nemotron-3-super-120b-a12b")
    wide = dataclasses.replace(spec, moe=dataclasses.replace(spec.moe, latent=0))
    plan = Plan(dp=64, ep=16)
    for a, b in zip(deepep_bytes(spec, plan, 4096, 2, 2), deepep_bytes(wide, plan, 4096, 2, 2), strict=True):
        assert a / b == pytest.approx(1024 / 4096, rel=1e-12)
    cluster = get_cluster("dgx-b200", 64)
    g = group_net(cluster, 8, 1)
    ratio = moe_pass_comm_s(spec, plan, 4096, 2, g, g, cluster) / moe_pass_comm_s(wide, plan, 4096, 2, g, g, cluster)
    assert 0.25 <= ratio < 0.3


def test_latent_experts_cost_less_than_wide_ones() -> None:
    """Routed expert FLOPs scale with the width they compute at; the two projections add 2·T·h·latent each way."""
    spec = get_model("nemotron-3-super-120b-a12b")
    wide = dataclasses.replace(spec, moe=dataclasses.replace(spec.moe, latent=0))
    dev = get_device("b200-sxm-180gb")
    args = (True, 1, 4096, 1, 1, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16, dev)
    lat, full = layer_cost(spec, *args).model_flops, layer_cost(wide, *args).model_flops
    T, k, f, h, latent = 4096, 22, 2688, 4096, 1024
    routed = 3 * 2 * T * k * 2 * f  # fwd + bwd of fc1 and fc2 per unit of input width
    assert full - lat == pytest.approx(routed * (h - latent) - 3 * 2 * T * 2 * h * latent, rel=1e-9)


def test_serving_refuses_latent_moe() -> None:
    spec = get_model("llama4-scout")
    latent = dataclasses.replace(spec, moe=dataclasses.replace(spec.moe, latent=1024))
    with pytest.raises(DistscopeError, match="LatentMoE"):
        check_lengths(latent, 128, 128, None)


@pytest.mark.parametrize(("name", "checkpoint"), [
    ("nemotron-3-ultra-550b-a55b", 560_524_603_904),  # Megatron Bridge verification card, MTP included
    ("nemotron-3.5-lightning-30b-a3b", 32_913_266_240),
])
def test_checkpoint_counts_with_one_mtp_block(name: str, checkpoint: int) -> None:
    """The published checkpoints hold the model and one MTP block (an attention and a MoE block, Nemotron's
    mtp_layers_block_type, plus the MTP's two norms and its 2h -> h projection): the catalog model plus that block
    is the checkpoint to within a few norms."""
    from distscope.workload.params import attention_params, ffn_params, mtp_own_params, norm_params

    s = get_model(name)
    moe = s.moe
    block = attention_params(s) + 2 * norm_params(s) + s.hidden * moe.experts + 2 * s.hidden * moe.latent
    block += moe.experts * ffn_params(s, moe.expert_ffn_hidden, s.expert_width)
    block += moe.shared_experts * ffn_params(s, moe.expert_ffn_hidden)
    assert total_params(s) + block + mtp_own_params(s) == pytest.approx(checkpoint, rel=1e-6)


def test_ultra_imports_as_the_catalog_model(tmp_path: Path) -> None:
    """Nemotron 3 Ultra's config.json (its architecture fields: Megatron-LM's modelopt conf for the model and copies
    of the config agree) imports as the catalog's nemotron-3-ultra-550b-a55b, with its MTP block."""
    from distscope.workload.hf import load_hf_config

    cfg = dict(SUPER, hidden_size=8192, num_hidden_layers=108, mamba_num_heads=256, num_attention_heads=64,
               moe_latent_size=2048, moe_intermediate_size=5120, moe_shared_expert_intermediate_size=10240,
               max_position_embeddings=262144, num_nextn_predict_layers=1, mtp_layers_block_type=["attention", "moe"],
               hybrid_override_pattern="MEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM*EMEMEM*EMEMEMEM*"
                                       "EMEMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    got = load_hf_config(str(tmp_path / "config.json"))
    assert got.mtp_layers == 1
    skip = {"name", "source", "official_params", "official_params_precision", "mtp_layers"}
    want = get_model("nemotron-3-ultra-550b-a55b")
    assert {k: v for k, v in dataclasses.asdict(got).items() if k not in skip} == \
        {k: v for k, v in dataclasses.asdict(want).items() if k not in skip}
