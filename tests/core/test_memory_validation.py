"""The memory model against published peak memory per GPU (data/evidence/memory_runs.csv, sources in
data/evidence/memory_runs.README.md).

Target (issue 12): within 10%. Measured (tensors only, vs the allocator's published peak):
- 6 eager rows (4 Megatron-LM max-allocated, 2 torchtitan max-reserved): mean abs error 8.4%
  (target met on these; every row under-predicted, by 4.8-12.9%);
- all 22 rows: 13.8% (18 torchtitan rows 15.5%, 4 Megatron-LM rows 6.4%). The 16 torch.compile rows (torchtitan) are reported apart: compilation changes
  which intermediates exist, which the model does not describe. Their worst misses are torchtitan's
  FSDP + TP (2D, -22..-27%) and FSDP + TP + PP (-8..-29%) runs. (main's removal of the recomputed-layer transient
  moved the full-AC + PP rows by up to -0.7 points.)
Before this file's mechanisms (torchtitan's per-op selective checkpointing, its fp32 loss chain,
FSDP2's fp32 shards and gathered root, pipelining's kept outputs, and torchtitan's default of 8
pipeline micro-batches) the same 16 torchtitan rows were off by 28.4% on average.
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
    assert s["eager_mae_pct"] is not None and s["eager_mae_pct"] <= 10.0  # measured 8.4%
    assert max(abs(r.error_pct) for r in eager) <= 15.0  # measured 12.9% (torchtitan, peak reserved)
    assert s["mae_pct"] is not None and s["mae_pct"] <= 14.0  # measured 13.8% over all 22 rows
    megatron = [abs(r.error_pct) for r in rows if r.framework is Framework.MEGATRON]
    assert statistics.mean(megatron) <= 7.0  # measured 6.4% (max allocated, Megatron-LM's own table)
