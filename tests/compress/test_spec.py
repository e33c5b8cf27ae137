import subprocess
import sys
from pathlib import Path

import pytest

from distscope.compress.spec import (
    METHOD_SPECS,
    CommClass,
    CompressionConfig,
    CompressionMethod,
    MethodSpec,
    compressed_comm_cost,
    hbm_bound_GBps,
    parse_compression_config,
    powersgd_ratio_vs_bf16,
    ratio_vs,
    ratio_vs_bf16,
)
from distscope.errors import DistscopeError

SRC = Path(__file__).resolve().parents[2] / "src"


def test_package_root_and_spec_do_not_import_torch() -> None:
    code = "import sys, distscope.compress, distscope.compress.spec; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(SRC), "PATH": ""}, check=True)
    assert out.stdout.strip() == "False"


def test_ratio_from_bits_group_and_scale_dtype() -> None:
    fp16 = MethodSpec(method=CompressionMethod.INT4, bits=4, group_size=128, scale_dtype="float16")
    assert ratio_vs_bf16(fp16) == pytest.approx((4 + 16 / 128) / 16)
    assert ratio_vs_bf16(METHOD_SPECS[CompressionMethod.INT4]) == pytest.approx((4 + 32 / 128) / 16)
    assert ratio_vs_bf16(METHOD_SPECS[CompressionMethod.INT8]) == pytest.approx((8 + 32 / 2048) / 16)
    assert ratio_vs_bf16(METHOD_SPECS[CompressionMethod.BF16]) == 1.0
    assert ratio_vs(METHOD_SPECS[CompressionMethod.BF16], 4) == 0.5  # vs fp32
    assert powersgd_ratio_vs_bf16(100, 200, 2) == pytest.approx(2 * 300 * 4 / (100 * 200 * 2))


def test_ratio_matches_real_wire_bytes() -> None:
    torch = pytest.importorskip("torch")
    from distscope.compress.quantize import QuantConfig, quantize

    for method, cfg in [(CompressionMethod.INT4, QuantConfig(bits=4, group_size=128)),
                        (CompressionMethod.INT8, QuantConfig(bits=8, group_size=2048))]:
        x = torch.randn(1 << 16, dtype=torch.bfloat16)
        assert quantize(x, cfg).nbytes / (x.numel() * x.element_size()) == pytest.approx(
            ratio_vs_bf16(METHOD_SPECS[method]))


def test_cost_function() -> None:
    c = compressed_comm_cost(uncompressed_bytes=1e9, uncompressed_comm_s=0.1, method=CompressionMethod.INT4,
                             quant_GBps=100.0, dequant_GBps=200.0, latency_s=0.01)
    r = ratio_vs_bf16(METHOD_SPECS[CompressionMethod.INT4])
    assert c.comm_bytes == pytest.approx(1e9 * r)
    assert c.comm_s == pytest.approx(0.01 + 0.09 * r)
    assert c.quant_s == pytest.approx(0.01) and c.dequant_s == pytest.approx(0.005)
    assert c.total_s == pytest.approx(c.comm_s + 0.015)
    tlq = compressed_comm_cost(uncompressed_bytes=1e9, uncompressed_comm_s=0.1,
                               method=CompressionMethod.TLQ_HS, quant_GBps=100.0, dequant_GBps=100.0)
    assert tlq.quant_s == pytest.approx(0.02)  # two quantization passes
    none = compressed_comm_cost(uncompressed_bytes=5.0, uncompressed_comm_s=1.0,
                                method=CompressionMethod.NONE)
    assert (none.comm_bytes, none.total_s) == (5.0, 1.0)
    # fp32 input: int4 saves 8x rather than 4x
    c32 = compressed_comm_cost(uncompressed_bytes=1e9, uncompressed_comm_s=0.1, method=CompressionMethod.INT4,
                               uncompressed_dtype_bytes=4)
    assert c32.comm_bytes == pytest.approx(1e9 * r / 2)
    with pytest.raises(DistscopeError, match="quant_GBps"):
        compressed_comm_cost(uncompressed_bytes=1.0, uncompressed_comm_s=1.0, method=CompressionMethod.INT4,
                             quant_GBps=0)


def test_hbm_bound_default() -> None:
    assert hbm_bound_GBps(1000.0, 0.5, 2.0, 2.0) == pytest.approx(250.0)
    with pytest.raises(DistscopeError):
        hbm_bound_GBps(1000.0, 1.5, 2.0, 2.0)


def test_parse_config() -> None:
    cfg = parse_compression_config("dp-grad=int4-hs,weights=int4-diff,tp=fp8")
    assert cfg == CompressionConfig(dp_grad=CompressionMethod.INT4_HS, weights=CompressionMethod.QWD_INT4,
                                    tp=CompressionMethod.FP8)
    assert cfg.method_for(CommClass.WEIGHTS) is CompressionMethod.QWD_INT4
    assert parse_compression_config(" weights = qwd-int4 ").dp_grad is CompressionMethod.NONE
    assert parse_compression_config("") == CompressionConfig()


@pytest.mark.parametrize("text,msg", [
    ("dp-grad=int5", "dp-grad='int5' is not a method"),
    ("dpgrad=int4", "class 'dpgrad' is not valid; valid: dp-grad, weights, tp; closest: dp-grad"),
    ("tp=tlq-hs", "tp=tlq-hs is not valid for tp"),
    ("weights=powersgd", "weights=powersgd is not valid"),
    ("dp-grad", "must look like CLASS=METHOD"),
    ("tp=fp8,tp=int8", "given twice"),
])
def test_parse_errors_are_one_line(text: str, msg: str) -> None:
    with pytest.raises(DistscopeError) as exc:
        parse_compression_config(text)
    assert msg in str(exc.value) and "\n" not in str(exc.value)
