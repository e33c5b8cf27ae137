"""Hugging Face config.json of the 2025-26 MoE families (workload/hf_moe.py): shapes, the catalog's own
entries reproduced from their configs, and one-line refusals of MoE fields distscope does not model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from distscope.cli import main
from distscope.errors import DistscopeError
from distscope.workload.catalog import get_model
from distscope.workload.hf import load_hf_config
from distscope.workload.params import total_params

# the published config.json fields of each model (architecture fields only)
DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
               "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
               "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
               "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "head_dim": 64,
               "vocab_size": 129280, "max_position_embeddings": 163840, "tie_word_embeddings": False,
               "num_nextn_predict_layers": 1, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5,
               "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True, "ep_size": 1}
QWEN3_30B = {"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
             "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
             "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "max_position_embeddings": 40960,
             "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
             "router_aux_loss_coef": 0.001}
# zai-org/GLM-4.5's fields (the shapes as Megatron-Bridge's docs/models/glm/glm45.md states them), with its
# attention extras, which are not priced
GLM_45 = {"model_type": "glm4_moe", "hidden_size": 5120, "intermediate_size": 12288, "moe_intermediate_size": 1536,
          "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128,
          "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
          "vocab_size": 151552, "max_position_embeddings": 131072, "tie_word_embeddings": False,
          "num_nextn_predict_layers": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.5,
          "norm_topk_prob": True, "attention_bias": True, "use_qk_norm": True, "partial_rotary_factor": 0.5}
GPT_OSS_120B = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 36,
                "num_local_experts": 128, "num_experts_per_tok": 4, "num_attention_heads": 64,
                "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128, "vocab_size": 201088,
                "max_position_embeddings": 131072, "tie_word_embeddings": False}
LLAMA4_SCOUT = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "vocab_size": 202048,
    "max_position_embeddings": 10485760}}


def _write(tmp_path: Path, cfg: dict, name: str = "model") -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _same_shape(a, b) -> bool:  # type: ignore[no-untyped-def]
    skip = {"name", "source", "official_params", "official_params_precision", "mtp_layers"}
    return all(getattr(a, f.name) == getattr(b, f.name) for f in dataclasses.fields(a) if f.name not in skip)


@pytest.mark.parametrize(("cfg", "catalog"), [(DEEPSEEK_V3, "deepseek-v3"), (QWEN3_30B, "qwen3-30b-a3b"),
                                              (GPT_OSS_120B, "gpt-oss-120b"), (GLM_45, "glm-4.5"),
                                              (dict(GLM_45, hidden_size=4096, intermediate_size=10944,
                                                    moe_intermediate_size=1408, num_hidden_layers=46,
                                                    n_routed_experts=128, first_k_dense_replace=1, use_qk_norm=False),
                                               "glm-4.5-air")])
def test_config_reproduces_the_catalog_entry(tmp_path: Path, cfg: dict, catalog: str) -> None:
    """The catalog's DeepSeek-V3 and GLM-4.5 are the main models; their config.json adds the one MTP module."""
    spec = load_hf_config(_write(tmp_path, cfg))
    assert _same_shape(spec, get_model(catalog))
    assert spec.mtp_layers == cfg.get("num_nextn_predict_layers", 0)


def test_kimi_k2_is_read_as_deepseek_v3(tmp_path: Path) -> None:
    cfg = dict(DEEPSEEK_V3, model_type="kimi_k2", n_routed_experts=384, first_k_dense_replace=1,
               num_attention_heads=64, num_key_value_heads=64, vocab_size=163840, num_nextn_predict_layers=0)
    spec = load_hf_config(_write(tmp_path, cfg))
    assert _same_shape(spec, dataclasses.replace(get_model("kimi-k2"), max_positions=163840))


def test_llama4_text_config_with_shared_expert(tmp_path: Path) -> None:
    spec = load_hf_config(_write(tmp_path, LLAMA4_SCOUT))
    assert spec.moe is not None and (spec.moe.experts, spec.moe.top_k, spec.moe.shared_experts) == (16, 1, 1)
    assert spec.moe.expert_ffn_hidden == 8192 and spec.moe_layers == 48
    assert total_params(spec) == pytest.approx(107.8e9, rel=0.01)  # 109B of the model card counts its vision tower


def test_interleaved_llama4_warns(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cfg = {"model_type": "llama4", "text_config": dict(LLAMA4_SCOUT["text_config"], num_local_experts=128,
                                                         interleave_moe_layer_step=2)}
    spec = load_hf_config(_write(tmp_path, cfg))
    assert spec.moe_layers == 24 and total_params(spec) == pytest.approx(400e9, rel=0.01)  # Maverick: 400B
    assert "interleave_moe_layer_step=2" in capsys.readouterr().err


@pytest.mark.parametrize(("base", "extra", "needle"), [
    (QWEN3_30B, {"moe_capacity_factor": 1.25}, "moe_capacity_factor=1.25 is an MoE field"),
    (DEEPSEEK_V3, {"n_expert_groups_dense": 2}, "n_expert_groups_dense=2 is an MoE field"),
    (QWEN3_30B, {"mlp_only_layers": [0, 5]}, "mlp_only_layers=[0, 5]"),
    (DEEPSEEK_V3, {"moe_layer_freq": 2}, "moe_layer_freq=2 is not modelled"),
    (GLM_45, {"moe_layer_freq": 2}, "moe_layer_freq=2 is not modelled"),
    (GLM_45, {"n_shared_expert_groups": 2}, "n_shared_expert_groups=2 is an MoE field"),
    (QWEN3_30B, {"num_experts_per_tok": 200}, "top_k=200 must be in 1..experts=128"),
    (LLAMA4_SCOUT["text_config"], {"moe_layers": [1, 3]}, "moe_layers=[1, 3] does not match"),
])
def test_unmodelled_moe_fields_are_refused(tmp_path: Path, base: dict, extra: dict, needle: str) -> None:
    with pytest.raises(DistscopeError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        load_hf_config(_write(tmp_path, dict(base, **extra)))


def test_refusal_is_one_line_from_the_cli(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, dict(QWEN3_30B, moe_capacity_factor=1.25))
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", path, "--gpus", "8"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "moe_capacity_factor" in err and "num_experts" in err
