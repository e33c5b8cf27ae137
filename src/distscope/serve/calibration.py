"""The serving model's few global parameters, fitted once over data/validation/serving_runs.csv by
`benchmarks/serve_calibrate.py` (which also reports their leave-one-source-out CV) and stored in
data/calibration.json. Everything else in serve/ comes from datasheets, kernel/collective benchmarks
or the stacks' own documentation (see each module).

- gemm_overlap_p: how well a GEMM overlaps streaming its weights with its math. A kernel takes
  (t_compute^p + t_memory^p)^(1/p): p = ∞ is the ideal roofline max(), p = 1 no overlap at all. Near the
  ridge point (small prefills, large decode batches) real kernels sit in between: few CTAs per SM and
  a shallow load pipeline (TensorRT-LLM's 1st-token latencies at 128 tokens on A100 are the sum of
  the two terms). Bounded to [1, 8].
- engine_layer_launch_s: host time to launch one layer's kernels when an iteration does not replay a
  CUDA graph (TensorRT engines of TensorRT-LLM ≤ 0.6 for every iteration, the context phase of later
  TensorRT-LLM): the iteration takes at least layers × this. Bounded to [0, 400 µs].
- mmha_l2_hit: for a decode-attention kernel that reads the KV cache per query head (TensorRT-LLM
  ≤ 0.6 on GQA/MQA models), the fraction of the a/g − 1 repeated reads of a KV block served by L2
  (the query heads of a group run as neighbouring CTAs): effective reads 1 + (a/g − 1)·(1 − hit).
  Bounded to [0, 0.9].
- vllm_seq_cpu_s: vLLM's Python engine work per running sequence per iteration (scheduling, output
  processing, detokenisation, streaming). The prior, 67 µs, is the vLLM v0.6.0 blog's profile (see
  stack.py); the bound [0, 100 µs] brackets it.
The eager-PyTorch counterpart of the launch floor (vLLM/SGLang prefills outside CUDA graphs) is not
fitted: ~12 kernels per layer at the ~10 µs PyTorch spends dispatching an op, 120 µs per layer (the
training estimator's host floor, model/host.py, uses the same two figures).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from importlib import resources

from distscope.errors import DistscopeError
from distscope.model import host

EAGER_LAYER_LAUNCH_S = host.DENSE_LAYER_OPS * host.OP_S


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServeCalibration:
    gemm_overlap_p: float = 2.0
    engine_layer_launch_s: float = 150e-6
    vllm_seq_cpu_s: float = 67e-6
    mmha_l2_hit: float = 0.0
    source: str = "defaults"

    def __post_init__(self) -> None:
        for k, (lo, hi) in BOUNDS.items():
            if not lo <= getattr(self, k) <= hi:
                raise DistscopeError(f"{k}={getattr(self, k)} must be in [{lo}, {hi}]")


BOUNDS = {"gemm_overlap_p": (1.0, 8.0), "engine_layer_launch_s": (0.0, 400e-6), "vllm_seq_cpu_s": (0.0, 100e-6),
          "mmha_l2_hit": (0.0, 0.9)}
FITTED = tuple(BOUNDS)


def _load() -> ServeCalibration:
    f = resources.files("distscope.serve").joinpath("data/calibration.json")
    if not f.is_file():
        return ServeCalibration()
    raw = json.loads(f.read_text())
    return ServeCalibration(**{k: float(raw[k]) for k in FITTED if k in raw}, source=str(raw.get("_source", "")))


_current = _load()


def current() -> ServeCalibration:
    return _current


def install(cal: ServeCalibration) -> None:
    """Replace the parameters (and drop every cached step model built with the old ones)."""
    global _current
    _current = cal
    from distscope.serve.cost import step_model

    step_model.cache_clear()


@contextlib.contextmanager
def using(cal: ServeCalibration) -> Iterator[None]:
    old = _current
    install(cal)
    try:
        yield
    finally:
        install(old)
