"""One sweep point and the planner run on it: the unit of work every engine executes.

`run_batch` is what a worker (a local process or a Ray task) runs. A point's result is a pure function
of the point and the plan settings: no clocks, no dependence on which other points share the batch or
the process (the cost functions' caches are keyed on their full arguments), so every engine and every
batching gives the same bytes. A point that fails (no plan fits, a GPU count the topology cannot hold,
a model/sequence mismatch) becomes a result with its one-line reason; the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.explore.axes import Axis
from distscope.explore.hardware import apply_hardware
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster
from distscope.workload.catalog import get_model
from distscope.workload.spec import ModelSpec, PositionKind
from distscope.workload.training import TrainingShape


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanSettings:
    """Planner choices shared by every point of a sweep (part of each point's key)."""

    precision: Precision = Precision.BF16
    compression: bool = True  # search quantized communication as a plan dimension, as `distscope plan`
    software: str | None = None  # a software preset (software/presets.py), as `distscope plan --software`
    # a torch module's input spec (`plan --input`; its leading dim is replaced by each micro-batch searched)
    input: str | None = None

    def __post_init__(self) -> None:
        if self.software is not None:
            from distscope.software.presets import get_software

            object.__setattr__(self, "software", get_software(self.software).name)  # bad names fail here
        if self.input is not None:
            from distscope.workload.module_graph import parse_inputs

            object.__setattr__(self, "input", ",".join(x.text for x in parse_inputs(self.input)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"precision": self.precision.value, "compression": self.compression}
        if self.software is not None:  # absent when unset: journals of earlier sweeps keep their keys
            out["software"] = self.software
        if self.input is not None:
            out["input"] = self.input
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Point:
    model: str
    cluster: str
    gpus: int
    global_batch: int
    seq: int
    hw: tuple[tuple[Axis, int | float], ...] = ()  # hardware overrides, in Axis order

    def key(self, settings: PlanSettings) -> str:
        """Canonical identity of the planner's work for this point (what resume matches on)."""
        return json.dumps({"model": self.model, "cluster": self.cluster, "gpus": self.gpus,
                           "global_batch": self.global_batch, "seq": self.seq,
                           "hw": {a.value: v for a, v in self.hw}, **settings.to_json()},
                          sort_keys=True, separators=(",", ":"))

    def cache_group(self) -> tuple[Any, ...]:
        """Points in one group share the cost functions' cached per-layer work (same model, sequence
        and device): engines keep them in one batch."""
        dev = tuple((a.value, v) for a, v in self.hw if a.hardware and not a.value.startswith(("nvlink", "nic")))
        return (self.model, self.cluster, self.seq, dev)


# The fields of a point's raw result, stored in the journal and the output table (types for readers).
RESULT_FIELDS: dict[str, type] = {
    "status": str, "reason": str, "step_time_s": float, "tokens_per_s": float, "mfu": float,
    "memory_GiB": float, "dp": int, "tp": int, "pp": int, "vp": int, "cp": int, "ep": int,
    "sequence_parallel": bool, "zero_stage": int, "distributed_optimizer": bool, "micro_batch": int,
    "recompute": str, "recompute_layers": int, "schedule": str, "stage_layers": str, "compression": str,
    "plans_evaluated": int,
}
OK, INFEASIBLE, ERROR = "ok", "infeasible", "error"


@functools.lru_cache(maxsize=64)
def model_spec(name: str) -> ModelSpec:
    return get_model(name)


@functools.lru_cache(maxsize=256)
def _cluster(name: str, gpus: int, hw: tuple[tuple[Axis, int | float], ...]) -> Cluster:
    return apply_hardware(get_cluster(name, gpus), dict(hw))


def scenario(p: Point, settings: PlanSettings) -> tuple[ModelSpec, TrainingShape, Cluster]:
    spec = model_spec(p.model)
    if spec.position is PositionKind.LEARNED and p.seq > spec.max_positions:
        raise DistscopeError(f"seq={p.seq} exceeds model {spec.name}'s learned position table "
                             f"({spec.max_positions} positions)")
    return spec, TrainingShape(seq_len=p.seq, global_batch=p.global_batch), _cluster(p.cluster, p.gpus, p.hw)


def _failed(status: str, reason: str, evaluated: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {k: None for k in RESULT_FIELDS}
    out.update(status=status, reason=" ".join(reason.split()), plans_evaluated=evaluated)
    return out


@functools.lru_cache(maxsize=64)
def _module_graph(model: str, inputs: str, micro_batch: int) -> Any:
    """A torch module traced at one micro-batch (device-independent: every point of a worker shares it)."""
    from distscope.workload.module_graph import at_batch, load_factory, parse_inputs, trace_module

    factory, name = load_factory(model)
    return trace_module(factory, at_batch(parse_inputs(inputs), micro_batch), name)


def _run_module_point(p: Point, settings: PlanSettings) -> dict[str, Any]:
    """A torch module's best data-parallel / pipelined plan (search/module_plan.py), in RESULT_FIELDS; its
    throughput in samples (a sample is a token of the objectives: one row of the input's leading dim)."""
    from distscope.search.module_plan import plan_module

    if settings.input is None:
        raise DistscopeError(f"model={p.model}: a torch module needs --input (e.g. x:8x3x224x224:bf16)")
    inputs = settings.input
    c = _cluster(p.cluster, p.gpus, p.hw)
    plans = plan_module(lambda mb: _module_graph(p.model, inputs, mb), c, global_batch=p.global_batch)
    evaluated = len(plans.ranked) + len(plans.infeasible)
    if not plans.ranked:
        need = min((sum(x.estimate.memory_bytes.values()) for x in plans.infeasible), default=0.0) / 2**30
        return _failed(INFEASIBLE, f"no plan fits in {c.memory_capacity_bytes / 2**30:.1f} GiB per GPU (the smallest "
                                   f"needs {need:.1f} GiB; {evaluated} plans)", evaluated)
    best = plans.ranked[0]
    est = best.estimate
    return {
        "status": OK, "reason": "", "step_time_s": est.step_time_s, "tokens_per_s": est.samples_per_s,
        "mfu": est.mfu, "memory_GiB": sum(est.memory_bytes.values()) / 2**30,
        "dp": p.gpus // best.pp, "tp": 1, "pp": best.pp, "vp": 1, "cp": 1, "ep": 1, "sequence_parallel": False,
        "zero_stage": best.zero, "distributed_optimizer": False, "micro_batch": best.micro_batch,
        "recompute": "full" if best.recompute else "none", "recompute_layers": 0, "schedule": "1f1b",
        "stage_layers": "", "compression": "none", "plans_evaluated": evaluated,
    }


def run_point(p: Point, settings: PlanSettings) -> dict[str, Any]:
    """The best plan for one point (RESULT_FIELDS), or its failure and one-line reason."""
    from distscope.workload.module_graph import is_module_ref

    if is_module_ref(p.model):
        try:
            return _run_module_point(p, settings)
        except DistscopeError as exc:
            return _failed(ERROR, str(exc))
        except Exception as exc:  # a bug in distscope: recorded, the sweep goes on
            return _failed(ERROR, f"internal error: {type(exc).__name__}: {exc}")
    from distscope.search.compression import best_compressed, config_label
    from distscope.search.planner import search
    from distscope.search.settings import planner_space
    from distscope.search.space import why_no_layout
    from distscope.software.presets import get_software

    try:
        spec, shape, c = scenario(p, settings)
        sw = get_software(settings.software) if settings.software is not None else None
        space = planner_space(spec=spec, device=c.device, precision=settings.precision, software=sw)
        res = search(spec, shape, c, space)
        if res.best is None:
            why = (why_no_layout(space, spec, shape, c) if res.layouts == 0 else
                   f"no plan fits in {c.memory_capacity_bytes / 2**30:.1f} GiB per GPU "
                   f"({res.evaluated} plans over {res.layouts} layouts)")
            return _failed(INFEASIBLE, why, res.evaluated)
        best, evaluated = res.best, res.evaluated
        if settings.compression:
            cr = best_compressed(spec, shape, c, res.pool, res.comm_pool, base=best, software=sw)
            if cr is not None:
                evaluated += cr.evaluated
                if cr.compressed.step_time_s < best.step_time_s:
                    best = cr.compressed
    except DistscopeError as exc:
        return _failed(ERROR, str(exc))
    except Exception as exc:  # a bug in distscope: recorded (and counted by the CLI), the sweep goes on
        return _failed(ERROR, f"internal error: {type(exc).__name__}: {exc}")
    plan, est = best.plan, best.estimate
    return {
        "status": OK, "reason": "", "step_time_s": est.step_time_s, "tokens_per_s": est.tokens_per_s,
        "mfu": est.mfu, "memory_GiB": est.memory.total_bytes / 2**30,
        "dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "vp": plan.vp, "cp": plan.cp, "ep": plan.ep,
        "sequence_parallel": plan.sp, "zero_stage": plan.zero_stage,
        "distributed_optimizer": plan.distributed_optimizer, "micro_batch": plan.micro_batch,
        "recompute": plan.recompute.value, "recompute_layers": plan.recompute_layers,
        "schedule": plan.schedule.value, "stage_layers": ",".join(map(str, plan.stage_layers)),
        "compression": config_label(plan.compression), "plans_evaluated": evaluated,
    }


def run_batch(points: list[tuple[str, Point]], settings: PlanSettings) -> list[tuple[str, dict[str, Any]]]:
    """(key, result) for each (key, point) of a batch, in order."""
    return [(key, run_point(p, settings)) for key, p in points]
