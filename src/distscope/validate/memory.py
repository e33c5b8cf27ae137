"""Peak memory per GPU against published measurements (data/evidence/memory_runs.csv).

Each row is a published run's peak memory per GPU with its plan; the estimator's worst-stage total
(model/memory.py terms plus the transients in model/estimate.py) is compared with it. The published
figures are peak *reserved* memory of PyTorch's caching allocator (torchtitan's memory monitor), so
they include allocator caching the model does not try to predict.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from distscope.dtypes import Precision
from distscope.model.estimate import estimate
from distscope.plan import Plan, Recompute, Schedule
from distscope.system.presets import get_cluster
from distscope.userfile import read_text
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape

GiB = 2**30


@dataclasses.dataclass(frozen=True)
class MemoryCheck:
    run_id: str
    measured_GiB: float
    predicted_GiB: float
    compiled: bool

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_GiB / self.measured_GiB - 1.0)


def check_file(path: str | Path) -> list[MemoryCheck]:
    out = []
    for r in csv.DictReader(io.StringIO(read_text(path, "memory CSV"))):
        spec, n = get_model(r["model"]), int(r["gpus"])
        shape = TrainingShape(seq_len=int(r["seq_len"]), global_batch=int(r["global_batch"]))
        plan = Plan(dp=int(r["dp"]), tp=int(r["tp"]), pp=int(r["pp"]), vp=int(r["vp"]), cp=int(r["cp"]),
                    zero_stage=int(r["zero_stage"]), micro_batch=int(r["micro_batch"]),
                    recompute=Recompute(r["recompute"]), precision=Precision(r["precision"]),
                    schedule=Schedule(r["schedule"]), sequence_parallel=int(r["tp"]) > 1,
                    stage_layers=tuple(int(x) for x in r["stage_layers"].split(",") if x),
                    # torchtitan's default FSDP policy: reshard_after_forward = not pp_enabled
                    # (torchtitan/models/llama3/infra/parallelize.py, fsdp_reshard_after_forward="default")
                    reshard_after_forward=int(r["zero_stage"]) != 3 or int(r["pp"]) == 1)
        plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads, experts=0, seq_len=shape.seq_len,
                   global_batch=shape.global_batch, num_gpus=n)
        e = estimate(spec, shape, get_cluster("dgx-h100", n), plan)
        out.append(MemoryCheck(r["run_id"], float(r["measured_GiB"]), e.memory.total_bytes / GiB, r["compiled"] == "1"))
    return out
