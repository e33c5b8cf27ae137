"""The memory model against published peak memory per GPU (data/evidence/memory_runs.csv, sources in
data/evidence/memory_runs.README.md).

Target (issue 12): within 10%. Measured (tensors only, vs the allocator's published peak):
- all 26 rows: mean abs error 11.5% (target missed);
- out of sample, the 4 Megatron-LM 1F1B rows of the Zero Bubble paper (ZB24-*, added after every
  mechanism below was written, nothing changed for them): 3.6%, max 8.7%;
- the 8 Megatron-LM rows (ZB24 + Megatron-LM's own tools/get_training_info table): 4.9%, max 8.7%;
- the 10 eager rows: 6.3%;
- the 18 torchtitan rows: 14.4%; the 16 torch.compile rows among them are reported apart:
  compilation changes which intermediates exist, which the model does not describe. Their worst
  misses are torchtitan's FSDP + TP (2D, -19..-24%) and FSDP + TP + PP (-7..-28%) runs.
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
    assert len(rows) >= 26 and {r.framework for r in rows} >= {Framework.MEGATRON, Framework.TORCHTITAN}
    assert {r.measure for r in rows} == set(Measure)
    eager = [r for r in rows if not r.compiled]
    assert len(eager) >= 10
    assert s["eager_mae_pct"] is not None and s["eager_mae_pct"] <= 7.0  # measured 6.3%
    assert max(abs(r.error_pct) for r in eager) <= 13.5  # measured 12.5% (torchtitan, peak reserved)
    assert s["mae_pct"] is not None and s["mae_pct"] <= 12.5  # measured 11.5% over all 26 rows
    megatron = [abs(r.error_pct) for r in rows if r.framework is Framework.MEGATRON]
    assert len(megatron) >= 8 and statistics.mean(megatron) <= 6.0  # measured 4.9%
    assert max(megatron) <= 10.0  # measured 8.7% (ZB24-1.5B)
    out_of_sample = [abs(r.error_pct) for r in rows if r.run_id.startswith("ZB24-")]
    assert len(out_of_sample) == 4 and statistics.mean(out_of_sample) <= 5.0  # measured 3.6%


def test_bad_memory_row_names_the_field(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from distscope.errors import DistscopeError

    text = (REPO / "data/evidence/memory_runs.csv").read_text().splitlines()
    header, row = text[0], next(line for line in text if line.startswith("ZB24-1.5B"))
    bad = tmp_path / "bad.csv"
    bad.write_text(header + "\n" + row.replace(",unfused,", ",sparse,") + "\n")
    with pytest.raises(DistscopeError, match=r"run_id=ZB24-1.5B-1F1B: column attention='sparse' must be one of"):
        check_file(bad)
