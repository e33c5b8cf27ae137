"""Ground truth on this machine: the examples' GPT served on CPU by a real continuous-batching loop with
Poisson arrivals; `serve simulate`'s engine, fed this machine's iteration costs, must predict the
measured p50 TTFT and p50 TPOT within 20% (issue 11, item 6). ~15 s."""

import pytest

torch = pytest.importorskip("torch")

from distscope.serve.measure import MeasureConfig, measure_and_predict  # noqa: E402


def test_simulator_predicts_the_served_gpt() -> None:
    cfg = MeasureConfig(rate_per_s=6.0, requests=40, input_len=32, output_len=16, max_batch=8, layers=4, hidden=256, heads=4)
    res = measure_and_predict(cfg)
    m, p = res["measured"], res["predicted"]
    assert m["throughput_out_tok_s"] > 0 and p["ttft_s_p50"] > 0
    err = res["error_pct"]
    assert abs(err["ttft_s_p50"]) <= 20, res
    assert abs(err["tpot_s_p50"]) <= 20, res
