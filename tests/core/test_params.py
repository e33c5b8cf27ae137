"""Parameter counts of every catalog model against the published figure."""

import pytest

from distscope.workload import get_model, model_names
from distscope.workload.params import active_params, total_params


@pytest.mark.parametrize("name", model_names())
def test_params_match_official(name: str) -> None:
    spec = get_model(name)
    assert spec.official_params > 0, f"{name} has no official figure"
    got = total_params(spec)
    # within 1%, or within half the rounding unit of a figure printed to two significant digits ("1.7B")
    tol = max(0.01 * spec.official_params, spec.official_params_precision / 2)
    assert abs(got - spec.official_params) <= tol, (got, spec.official_params)


def test_moe_active_params() -> None:
    assert active_params(get_model("mixtral-8x7b")) == pytest.approx(12.9e9, rel=0.01)  # Mistral: 12.9B active
    assert active_params(get_model("mixtral-8x22b")) == pytest.approx(39e9, rel=0.01)  # Mistral: 39B active
    assert active_params(get_model("deepseek-v3")) == pytest.approx(37e9, rel=0.02)  # DeepSeek: 37B activated


def test_gpt_matches_narayanan_eq2() -> None:
    # P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))  (Narayanan et al. 2021, eq. 2)
    s = get_model("gpt-39.1b")
    n, h, V, seq = s.layers, s.hidden, s.vocab, s.max_positions
    expected = 12 * n * h * h + 13 * n * h + (V + seq) * h
    # eq. 2 leaves out the final LayerNorm (2h)
    assert total_params(s) == expected + 2 * h


def test_unknown_model_suggests() -> None:
    from distscope.errors import DistscopeError

    with pytest.raises(DistscopeError, match="llama3-70b"):
        get_model("llama3-70")
