"""Peak memory per GPU against published measurements (data/evidence/memory_runs.csv and its README).

Each row is a published run's peak memory per GPU with its plan and framework. The estimator's
worst-stage total (model/memory.py terms, the transients and the framework's own allocations in
model/estimate.py and model/framework_memory.py) is compared with it, without the `workspace` term:
the published figures are the PyTorch caching allocator's peaks (`measure` = max_allocated: tensors
alive; max_reserved: plus the allocator's cached, fragmented free blocks), which never contain the
CUDA context or NCCL's buffers that the workspace stands for. Under-prediction of max_reserved rows is
what the capacity headroom (system/memory_budget.py) exists for.

The model is named by `model` (a catalog key), or, when `model` is blank, by `arch`, `layers`,
`hidden`, `heads`, `kv_heads`, `ffn_hidden`, `ffn_act` and `vocab` as in data/validation/README.md.
`attention` (flash/unfused) is optional: blank = flash. `measure` = unstated marks a source that prints a
peak without saying whether it is allocated or reserved.
`compiled` = 1 marks torch.compile runs: compilation fuses element-wise work and changes which
intermediates exist, which the model does not describe, so those rows are reported apart.
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import io
import statistics
from pathlib import Path

from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.model.estimate import estimate
from distscope.plan import AttentionImpl, Framework, Plan, Recompute, Schedule
from distscope.system.presets import get_cluster
from distscope.userfile import read_text
from distscope.validate.rows import _Cells, _spec
from distscope.workload.catalog import get_model
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

GiB = 2**30


class Measure(enum.Enum):
    MAX_ALLOCATED = "max_allocated"  # torch.cuda.max_memory_allocated
    MAX_RESERVED = "max_reserved"  # torch.cuda.max_memory_reserved (torchtitan's memory monitor)
    UNSTATED = "unstated"  # the source prints a peak without saying which (Megatron's report_memory logs both)


@dataclasses.dataclass(frozen=True)
class MemoryCheck:
    run_id: str
    framework: Framework
    measure: Measure
    measured_GiB: float
    predicted_GiB: float  # tensors only (total minus workspace), comparable with the allocator's peaks
    compiled: bool

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_GiB / self.measured_GiB - 1.0)


def _model(c: _Cells) -> ModelSpec:
    name = (c.row.get("model") or "").strip()
    return get_model(name) if name else _spec(c)


def _enum(c: _Cells, cls: type[enum.Enum], col: str) -> enum.Enum:
    try:
        return cls(c.raw(col).lower())
    except ValueError:
        raise c.fail(col, f"must be one of {', '.join(str(m.value) for m in cls)}") from None


def check_row(row: dict[str, str], line: int) -> MemoryCheck:
    rid = (row.get("run_id") or "").strip() or f"line{line}"
    c = _Cells(row, rid)
    spec = _model(c)
    n, tp, pp, cp = c.int("gpus"), c.int("tp"), c.int("pp"), c.int("cp")
    zero = c.int("zero_stage", lo=0)
    fw: Framework = _enum(c, Framework, "framework")  # type: ignore[assignment]
    shape = TrainingShape(seq_len=c.int("seq_len"), global_batch=c.int("global_batch"))
    try:
        plan = Plan(dp=c.int("dp"), tp=tp, pp=pp, vp=c.int("vp"), cp=cp, zero_stage=zero,
                    distributed_optimizer=bool(c.flag("distributed_optimizer")), micro_batch=c.int("micro_batch"),
                    recompute=_enum(c, Recompute, "recompute"), precision=_enum(c, Precision, "precision"),  # type: ignore[arg-type]
                    schedule=_enum(c, Schedule, "schedule"), sequence_parallel=bool(c.flag("sequence_parallel")),  # type: ignore[arg-type]
                    attention=(_enum(c, AttentionImpl, "attention") if (row.get("attention") or "").strip()  # type: ignore[arg-type]
                               else AttentionImpl.FLASH),
                    stage_layers=tuple(int(x) for x in (row.get("stage_layers") or "").split(",") if x.strip()),
                    # torchtitan's FSDP policy: reshard_after_forward = not pp_enabled
                    # (torchtitan@9dec370 parallelisms/parallelize_llama.py apply_fsdp)
                    reshard_after_forward=zero != 3 or pp == 1 or fw is not Framework.TORCHTITAN,
                    framework=fw)
        plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads, experts=0, seq_len=shape.seq_len,
                   global_batch=shape.global_batch, num_gpus=n)
    except DistscopeError as exc:
        raise DistscopeError(f"run_id={rid}: {exc}") from None
    e = estimate(spec, shape, get_cluster("dgx-h100", n), plan)
    tensors = e.memory.total_bytes - e.memory.workspace_bytes
    return MemoryCheck(rid, fw, _enum(c, Measure, "measure"), c.float("measured_GiB"), tensors / GiB,  # type: ignore[arg-type]
                       bool(c.flag("compiled")))


def check_file(path: str | Path) -> list[MemoryCheck]:
    text = read_text(path, "memory CSV")
    return [check_row(r, i + 2) for i, r in enumerate(csv.DictReader(io.StringIO(text, newline="")))]


def summary(rows: list[MemoryCheck]) -> dict[str, float | int | None]:
    """Mean absolute error (%) over all rows, the eager (not compiled) rows and per framework."""
    def mae(sel: list[MemoryCheck]) -> float | None:
        return statistics.mean(abs(r.error_pct) for r in sel) if sel else None
    out: dict[str, float | int | None] = {"rows": len(rows), "mae_pct": mae(rows),
                                          "eager_rows": sum(not r.compiled for r in rows),
                                          "eager_mae_pct": mae([r for r in rows if not r.compiled])}
    for fw in Framework:
        sel = [r for r in rows if r.framework is fw]
        if sel:
            out[f"{fw.value}_mae_pct"] = mae(sel)
    return out
