"""Hugging Face config.json import for the supported architectures."""

import json

import pytest

from distscope.errors import DistscopeError
from distscope.workload import get_model
from distscope.workload.params import total_params

LLAMA3_8B = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}
MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8,
           "num_experts_per_tok": 2}
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
NEOX = {"model_type": "gpt_neox", "hidden_size": 6144, "num_hidden_layers": 44, "num_attention_heads": 64,
        "intermediate_size": 24576, "vocab_size": 50432, "tie_word_embeddings": False}
QWEN2 = {"model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
         "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064, "tie_word_embeddings": False}


@pytest.mark.parametrize(("cfg", "expected"), [
    (LLAMA3_8B, 8_030_261_248),  # meta-llama/Meta-Llama-3-8B
    (MIXTRAL, 46_702_792_704),  # mistralai/Mixtral-8x7B-v0.1
    (GPT2, 124_439_808),  # openai-community/gpt2
    (NEOX, 20_554_567_680),  # EleutherAI/gpt-neox-20b
    (QWEN2, 7_615_616_512),  # Qwen/Qwen2-7B (q/k/v biases not modelled: < 0.01%)
])
def test_hf_config_param_counts(tmp_path, cfg, expected) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert total_params(get_model(str(p))) == pytest.approx(expected, rel=0.001)


def test_hf_bad_config(tmp_path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(DistscopeError, match="model_type='t5' not supported"):
        get_model(str(p))
    p.write_text("{not json")
    with pytest.raises(DistscopeError, match="cannot read"):
        get_model(str(p))
