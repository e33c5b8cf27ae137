"""A routed-expert grouped GEMM priced as one GEMM per local expert on the dense-GEMM curve, against
DeepGEMM's published grouped-GEMM benchmarks (model/data/kernels/grouped_gemm.csv)."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model import kernel_data
from distscope.system.device import get_device


def _rows(layout: str) -> list[dict[str, str]]:
    text = resources.files("distscope.model").joinpath("data/kernels/grouped_gemm.csv").read_text()
    return [r for r in csv.DictReader(text.splitlines()) if r["layout"] == layout]


def _model_tflops(r: dict[str, str]) -> float:
    """The benchmark's kernel alone: the measured ceiling without the sustained share σ of a training job."""
    dev = get_device(r["device"])
    dt = DType(r["dtype"])
    g, m, n, k = (int(r[c]) for c in ("groups", "m_per_group", "n", "k"))
    t = g * eff.gemm_time_s(m, n, k, dt.bytes, dev.flops(dt), dev.hbm_Bps, kernel_data.gemm_ceiling(dev.name, dt))
    return 2.0 * g * m * n * k / t / 1e12


@pytest.mark.parametrize("row", _rows("contiguous"), ids=lambda r: f"{r['groups']}x{r['m_per_group']}-{r['n']}x{r['k']}")
def test_training_sized_expert_gemms_run_on_the_dense_curve(row: dict[str, str]) -> None:
    assert _model_tflops(row) == pytest.approx(float(row["tflops"]), rel=0.10)


def test_contiguous_grouped_gemm_matches_one_gemm_of_the_same_shape() -> None:
    """The published fact the pricing rests on: 8 groups of 4096 rows run at one 4096-row GEMM's rate."""
    dense = {(r["n"], r["k"]): float(r["tflops"]) for r in _rows("dense")}
    for r in _rows("contiguous"):
        assert float(r["tflops"]) == pytest.approx(dense[(r["n"], r["k"])], rel=0.08), r


@pytest.mark.parametrize("row", _rows("masked"), ids=lambda r: f"{r['groups']}x{r['m_per_group']}-{r['n']}x{r['k']}")
def test_small_groups_pay_their_weight_reads(row: dict[str, str]) -> None:
    """256-1024 rows per group (masked layout): each group reads its own weights, which the per-expert
    pricing counts (one GEMM for all groups would read them once and run 10-30% faster than measured)."""
    assert _model_tflops(row) == pytest.approx(float(row["tflops"]), rel=0.15)
