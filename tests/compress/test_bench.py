"""The bench end to end at a small size: every method, every key, sane values (not timings)."""

import pytest

from distscope.compress.bench import BENCH_METHODS, BenchConfig, run_bench
from distscope.errors import DistscopeError


@pytest.fixture(scope="module")
def result() -> dict:
    return run_bench(BenchConfig(numel=1 << 16, throughput_numel=1 << 16, train_steps=2, repeats=1))


def test_every_method_reported(result: dict) -> None:
    rows = {m["name"]: m for m in result["methods"]}
    assert tuple(rows) == BENCH_METHODS
    for m in rows.values():
        for key in ("ratio_vs_bf16", "rel_l2_error", "quant_GBps", "dequant_GBps", "collective_s",
                    "uncompressed_s", "speedup_vs_uncompressed"):
            assert m[key] > 0, (m["name"], key)


def test_errors_are_ordered_by_bits(result: dict) -> None:
    rows = {m["name"]: m for m in result["methods"]}
    assert rows["bf16"]["rel_l2_error"] < rows["int8"]["rel_l2_error"] < rows["int4"]["rel_l2_error"] < 0.3
    assert rows["tlq-hs"]["rel_l2_error"] < 0.3
    # qWD rebuilds the new weights far better than quantizing the weights themselves
    assert rows["qwd-int4"]["rel_l2_error"] < rows["qwd-int4"]["rel_l2_error_direct_int4_weights"] / 20
    assert rows["int4"]["ratio_vs_bf16"] == pytest.approx((4 + 32 / 128) / 16)
    assert rows["powersgd"]["ratio_vs_bf16"] < rows["int4"]["ratio_vs_bf16"]


def test_bad_config() -> None:
    with pytest.raises(DistscopeError, match="numel=1000"):
        BenchConfig(numel=1000)
