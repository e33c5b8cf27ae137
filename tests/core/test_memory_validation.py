"""The memory model against published peak memory per GPU (data/evidence/memory_runs.csv, sources in
data/evidence/memory_runs.README.md).

Target (issue 12): within 10%. Measured (tensors only, vs the allocator's published peak):
- 6 eager rows (4 Megatron-LM max-allocated, 2 torchtitan max-reserved): mean abs error 8.2%
  (target met on these; every row under-predicted, by 4.4-12.5%);
- all 22 rows: 12.9% (target missed). The 4 Megatron-LM rows (another source than the torchtitan
  rows the framework terms were written against; the Megatron accounting was not changed for them):
  6.2%, max 8.2%. The 18 torchtitan rows: 14.4%; the 16 torch.compile rows among them are reported
  apart: compilation changes which intermediates exist, which the model does not describe. Their
  worst misses are torchtitan's FSDP + TP (2D, -19..-24%) and FSDP + TP + PP (-7..-28%) runs.
History on the torchtitan rows: 38.3% (main before this work; 16 rows) -> 28.4% (FSDP parameters and
fp32 gradients kept unsharded under PP) -> 15.3% (per-op selective checkpointing, its fp32 loss chain,
FSDP2's fp32 shards and gathered root, pipelining's kept outputs, torchtitan's default of 8 pipeline
micro-batches; 18 rows) -> 15.5% (main's removal of the recomputed-layer transient) -> 14.4% (the LM
head's saved input: model/framework_memory.py).
"""

from __future__ import annotations

import statistics

from distscope.plan import Framework
from distscope.validate.memory import Measure, check_file, summary
from tests.conftest import REPO


def test_memory_model_against_published_peaks() -> None:
    rows = check_file(REPO / "data/evidence/memory_runs.csv")
    for r in rows:
        print(f"{r.run_id:22s} {r.framework.value:10s} {r.measure.value:13s} compiled={int(r.compiled)} "
              f"measured {r.measured_GiB:5.1f} GiB predicted {r.predicted_GiB:5.1f} GiB {r.error_pct:+6.1f}%")
    s = summary(rows)
    print(s)
    assert len(rows) >= 22 and {r.framework for r in rows} >= {Framework.MEGATRON, Framework.TORCHTITAN}
    assert {r.measure for r in rows} == set(Measure)
    eager = [r for r in rows if not r.compiled]
    assert len(eager) >= 6
    assert s["eager_mae_pct"] is not None and s["eager_mae_pct"] <= 10.0  # measured 8.2%
    assert max(abs(r.error_pct) for r in eager) <= 13.5  # measured 12.5% (torchtitan, peak reserved)
    assert s["mae_pct"] is not None and s["mae_pct"] <= 13.5  # measured 12.9% over all 22 rows
    megatron = [abs(r.error_pct) for r in rows if r.framework is Framework.MEGATRON]
    assert statistics.mean(megatron) <= 7.0  # measured 6.2% (max allocated, Megatron-LM's own table)
    assert max(megatron) <= 9.0  # measured 8.2% (DP4 PP2)
