"""One serving replica: the model, its GPUs and layout, precision and stack, with its step-time model
and memory, built (and checked) once."""

from __future__ import annotations

import dataclasses

from distscope.serve import calibration
from distscope.serve.cost import StepTimes, stage_layers, step_model
from distscope.serve.layout import Layout
from distscope.serve.memory import ReplicaMemory, replica_memory
from distscope.serve.precision import ServePrecision
from distscope.serve.stack import Launch, Stack
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec


@dataclasses.dataclass(frozen=True, slots=True)
class Wake:
    """The cost of waking: an iteration that starts after the replica idled at least `after_s` takes
    `cost_s` longer (what an idle spell let go cold: caches, clocks). `serve measure` measures it on its
    host (serve/measure.py, Profiler.wake); the simulator's stacks have none."""

    after_s: float
    cost_s: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replica:
    spec: ModelSpec
    cluster: Cluster
    layout: Layout
    prec: ServePrecision
    stack: Stack
    step: StepTimes
    memory: ReplicaMemory
    context: int | None = None
    wake: Wake | None = None

    def launch_floor_s(self, decode_only: bool) -> float:
        """Least time an iteration takes to launch its kernels from the host: 0 when it replays a CUDA
        graph (decode-only iterations of graph-capturing stacks), else layers × the per-layer launch."""
        st = self.stack
        if st.launch is Launch.NONE or (decode_only and st.decode_graphs):
            return 0.0
        per_layer = calibration.current().engine_layer_launch_s if st.launch is Launch.ENGINE else calibration.EAGER_LAYER_LAUNCH_S
        return self.layout.pp * stage_layers(self.spec, self.layout.pp) * per_layer

    def iteration_s(self, tokens: float, seqs: int, ctx: float = 0.0, attn_units: float = 0.0, rows: float = 0.0) -> float:
        """Wall time of one iteration: the GPU step (at least its launch floor) plus the stack's CPU
        work, serial or overlapped."""
        gpu = max(self.step.time_s(tokens, ctx, attn_units, rows), self.launch_floor_s(attn_units == 0.0))
        cpu = self.stack.cpu_s(seqs)
        return max(gpu, cpu) if self.stack.cpu_overlapped else gpu + cpu


def build_replica(*, spec: ModelSpec, cluster: Cluster, layout: Layout, prec: ServePrecision, stack: Stack,
                  context: int | None = None, kv_fraction: float | None = None) -> Replica:
    layout.check(spec)
    prec.check(cluster.device)
    mem = replica_memory(spec, cluster.device, layout, prec, stack, kv_fraction)
    step = step_model(spec, cluster, layout, prec, stack.custom_all_reduce, stack.gqa_grouped)
    return Replica(spec=spec, cluster=cluster, layout=layout, prec=prec, stack=stack, step=step, memory=mem, context=context)
