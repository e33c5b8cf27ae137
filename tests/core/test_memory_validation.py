"""The memory model against published peak memory per GPU (data/evidence/memory_runs.csv).

Target (issue 12): within 10%. NOT met today; this test pins the current error so it can only improve
and says where it stands. The 16 rows are torchtitan's December 2024 Llama 3.1 benchmarks (H100):
- eager FSDP with per-op selective checkpointing: over-predicted by 30-37% (distscope's "selective"
  keeps what Korthikanti-style selective recompute keeps; torchtitan's per-op SAC also recomputes
  every other matmul);
- full checkpointing and FSDP + PP: under-predicted by 17-39% (the published figure is peak
  *reserved* memory). torchtitan keeps FSDP parameters unsharded across micro-batches under PP and
  accumulates unsharded fp32 gradients: with the plan's reshard_after_forward=False for those rows
  their error fell from 55-75% to 17-39%.
"""

from __future__ import annotations

import statistics

from distscope.validate.memory import check_file
from tests.conftest import REPO


def test_memory_model_against_published_peaks() -> None:
    rows = check_file(REPO / "data/evidence/memory_runs.csv")
    assert len(rows) >= 10
    errs = [abs(r.error_pct) for r in rows]
    print({r.run_id: round(r.error_pct, 1) for r in rows})
    assert statistics.mean(errs) <= 30.0  # measured 28.4% (37.9% before FSDP no-reshard): far from the 10% target
    eager = [abs(r.error_pct) for r in rows if not r.compiled]
    assert statistics.mean(eager) <= 35.0  # measured 33.5% on the 2 eager rows
