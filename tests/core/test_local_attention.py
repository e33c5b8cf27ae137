"""Sliding-window and chunked attention layers (ModelSpec.local_attention): keys per query, their pricing
in a layer, and their import from Hugging Face configs."""

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distscope.dtypes import DType, Precision
from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model.layer import layer_cost, local_attention_s
from distscope.plan import AttentionImpl, Recompute
from distscope.serve.context import check_lengths
from distscope.system.device import get_device
from distscope.workload import get_model
from distscope.workload.spec import LocalAttention, LocalKind

H100 = get_device("h100-sxm5-80gb")


@given(kind=st.sampled_from(list(LocalKind)), size=st.integers(1, 300), s=st.integers(1, 1200))
def test_keys_per_query_counts_the_mask(kind: LocalKind, size: int, s: int) -> None:
    """The closed form against the mask counted query by query."""
    band = LocalAttention(kind=kind, size=size, layers=1)
    if kind is LocalKind.SLIDING:
        count = sum(min(i + 1, size) for i in range(s))
    else:
        count = sum(i % size + 1 for i in range(s))
    assert band.keys_per_query(s) == pytest.approx(count / s, rel=1e-12)


def test_a_narrow_band_costs_more_than_its_pairs_and_far_less_than_full() -> None:
    """GPT-OSS's 128-token window at 8k and 128k: the kernel does less work than full causal attention,
    but a narrow band runs at a short sequence's efficiency, so time falls by less than the pairs do."""
    band = LocalAttention(kind=LocalKind.SLIDING, size=128, layers=1)
    for s in (8192, 131072):
        full = eff.flash_attention_s(H100, DType.BF16, 64, s, s, 64, 64)
        local = local_attention_s(band, H100, DType.BF16, 64, s, s, 64, 64, "fa2")
        pairs = ((s + 1) / 2) / band.keys_per_query(s)
        for f, lo in zip(full, local, strict=True):
            assert f / pairs < lo < f / 4


def test_chunked_attention_is_causal_attention_per_chunk() -> None:
    band = LocalAttention(kind=LocalKind.CHUNKED, size=8192, layers=1)
    s = 4 * 8192
    per_chunk = eff.flash_attention_s(H100, DType.BF16, 40 * 4, 8192, 8192, 128, 128)
    assert local_attention_s(band, H100, DType.BF16, 40, s, s, 128, 128, "fa2") == pytest.approx(per_chunk)


def _layer(spec, s: int):  # type: ignore[no-untyped-def]
    return layer_cost(spec, True, 1, s, 1, 1, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16, H100)


def test_gpt_oss_layers_are_priced_as_half_local() -> None:
    spec = get_model("gpt-oss-120b")
    assert spec.local_attention == LocalAttention(kind=LocalKind.SLIDING, size=128, layers=18)
    full = dataclasses.replace(spec, local_attention=None)
    for s in (8192, 131072):
        a, b = _layer(full, s), _layer(spec, s)
        assert 0.5 * a.attn_fwd_s < b.attn_fwd_s < 0.56 * a.attn_fwd_s  # half the layers nearly free
        assert b.model_flops < a.model_flops
        assert b.gemm_fwd_s == a.gemm_fwd_s
    # a sequence inside the window: every layer is plain causal attention
    assert _layer(spec, 128) == _layer(full, 128)


def _hf(tmp_path, cfg: dict):  # type: ignore[no-untyped-def]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return get_model(str(p))


MISTRAL_V01 = {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096}


def test_hf_local_layers(tmp_path) -> None:
    assert _hf(tmp_path, MISTRAL_V01).local_attention == LocalAttention(kind=LocalKind.SLIDING, size=4096, layers=32)
    assert _hf(tmp_path, {**MISTRAL_V01, "sliding_window": None}).local_attention is None
    types = ["sliding_attention"] * 5 + ["full_attention"]
    gemma_like = {**MISTRAL_V01, "num_hidden_layers": 30, "sliding_window": 1024, "layer_types": types * 5}
    assert _hf(tmp_path, gemma_like).local_attention == LocalAttention(kind=LocalKind.SLIDING, size=1024, layers=25)
    qwen2 = {**MISTRAL_V01, "model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 28}
    assert _hf(tmp_path, qwen2).local_attention == LocalAttention(kind=LocalKind.SLIDING, size=4096, layers=4)
    assert _hf(tmp_path, {**qwen2, "use_sliding_window": False}).local_attention is None
    scout = {"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
        "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
        "num_local_experts": 16, "num_experts_per_tok": 1, "vocab_size": 202048, "attention_chunk_size": 8192}}
    assert _hf(tmp_path, scout).local_attention == LocalAttention(kind=LocalKind.CHUNKED, size=8192, layers=36)


@pytest.mark.parametrize(("extra", "message"), [
    ({"layer_types": ["sliding_attention"] * 31}, "layer_types=.* for each of the 32 layers"),
    ({"layer_types": ["linear_attention"] * 32}, "layer_types=.* must list one of full_attention"),
    ({"layer_types": [["sliding_attention"]] * 32}, "layer_types=.* must list one of full_attention"),
    ({"model_type": "llama4_text", "attention_chunk_size": 8192, "no_rope_layers": [2] * 32}, "no_rope_layers="),
    ({"sliding_window": -4}, "sliding_window=-4 must be an integer"),
    ({"layer_types": ["sliding_attention"] * 16 + ["chunked_attention"] * 16, "attention_chunk_size": 8},
     "mixes sliding and chunked"),
])
def test_hf_bad_local_layers(tmp_path, extra: dict, message: str) -> None:
    with pytest.raises(DistscopeError, match=message) as err:
        _hf(tmp_path, {**MISTRAL_V01, **extra})
    assert "\n" not in str(err.value)


def test_serving_says_local_layers_are_priced_as_full(capsys) -> None:
    check_lengths(get_model("gpt-oss-120b"), 2048, 256, None)
    assert "18 sliding-attention layers (128 tokens) are served as full attention" in capsys.readouterr().err
