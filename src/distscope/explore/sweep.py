"""A sweep: base scenario + axes + planner settings + objectives, and its grid of points.

The grid is the product of the axes in the order given (the first axis outermost), so point i is the
same point in every run of the same sweep. Every model and preset is resolved before any planning,
so a bad name fails the whole sweep at once with a one-line error; a point that cannot be planned
fails on its own (point.py).
"""

from __future__ import annotations

import dataclasses
import itertools

from distscope.errors import DistscopeError
from distscope.explore.axes import Axis, AxisValues, Value, check_value
from distscope.explore.objectives import Objectives
from distscope.explore.point import PlanSettings, Point, model_spec
from distscope.scenario import PLANNER_SYSTEM, PLANNER_WORKLOAD, default_seq
from distscope.system.presets import get_cluster
from distscope.workload.module_graph import is_module_ref, load_factory

MAX_POINTS = 1_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Base:
    """The scenario every point starts from; axes override its fields."""

    # the planner's demo scenario, as `distscope plan` (scenario/flags.py)
    model: str = PLANNER_WORKLOAD.model
    cluster: str = PLANNER_SYSTEM.cluster
    gpus: int = PLANNER_SYSTEM.gpus
    global_batch: int = PLANNER_WORKLOAD.global_batch
    seq: int | None = PLANNER_WORKLOAD.seq  # None: 4096, or the model's context if shorter (as every command)

    def __post_init__(self) -> None:
        check_value(Axis.MODEL, self.model)
        check_value(Axis.CLUSTER, self.cluster)
        check_value(Axis.GPUS, self.gpus)
        check_value(Axis.GLOBAL_BATCH, self.global_batch)
        if self.seq is not None:
            check_value(Axis.SEQ, self.seq)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sweep:
    base: Base = dataclasses.field(default_factory=Base)
    axes: tuple[AxisValues, ...] = ()
    plan: PlanSettings = dataclasses.field(default_factory=PlanSettings)
    objectives: Objectives = dataclasses.field(default_factory=Objectives)

    def __post_init__(self) -> None:
        seen: set[Axis] = set()
        for a in self.axes:
            if a.axis in seen:
                raise DistscopeError(f"axis {a.axis.value} is given twice")
            seen.add(a.axis)
        n = self.size
        if n > MAX_POINTS:
            raise DistscopeError(f"the grid has {n:,} points; at most {MAX_POINTS:,} (split the sweep)")

    @property
    def size(self) -> int:
        n = 1
        for a in self.axes:
            n *= len(a.values)
        return n

    def values(self, axis: Axis) -> tuple[Value, ...]:
        for a in self.axes:
            if a.axis is axis:
                return a.values
        base: dict[Axis, Value] = {Axis.MODEL: self.base.model, Axis.CLUSTER: self.base.cluster,
                                   Axis.GPUS: self.base.gpus, Axis.GLOBAL_BATCH: self.base.global_batch}
        return (base[axis],) if axis in base else ()

    def check_names(self) -> None:
        """Load every model and preset once: a bad name fails the sweep before any planning. A torch
        module needs the sweep's --input and takes no sequence (its input spec shapes it)."""
        for m in self.values(Axis.MODEL):
            if is_module_ref(str(m)):
                if self.plan.input is None:
                    raise DistscopeError(f"model={m}: a torch module needs --input (e.g. x:8x3x224x224:bf16)")
                if self.base.seq is not None or self.values(Axis.SEQ):
                    raise DistscopeError(f"model={m}: a torch module is shaped by --input, not by seq")
                load_factory(str(m))
            else:
                model_spec(str(m))
        for c in self.values(Axis.CLUSTER):
            get_cluster(str(c), 1)

    def points(self) -> list[Point]:
        self.check_names()
        names = [a.axis for a in self.axes]
        out = []
        for combo in itertools.product(*(a.values for a in self.axes)):
            v = dict(zip(names, combo, strict=True))
            model = str(v.get(Axis.MODEL, self.base.model))
            seq = v.get(Axis.SEQ, self.base.seq)
            out.append(Point(
                model=model, cluster=str(v.get(Axis.CLUSTER, self.base.cluster)),
                gpus=int(v.get(Axis.GPUS, self.base.gpus)), global_batch=int(v.get(Axis.GLOBAL_BATCH, self.base.global_batch)),
                seq=0 if is_module_ref(model) else int(seq) if seq is not None else default_seq(model_spec(model)),
                hw=tuple((a, v[a]) for a in Axis if a.hardware and a in v),  # type: ignore[misc]
            ))
        return out


def sweep_json(s: Sweep) -> dict[str, object]:
    """The sweep's description, stored beside its results."""
    return {"base": {"model": s.base.model, "cluster": s.base.cluster, "gpus": s.base.gpus,
                     "global_batch": s.base.global_batch, "seq": s.base.seq},
            "axes": {a.axis.value: list(a.values) for a in s.axes}, "plan": s.plan.to_json(),
            "objectives": s.objectives.to_json()}
