"""Discrete-event simulation of one serving replica, or several behind a router, on the project's
event loop (`distscope.sim.loop`). The replica processes are in engine.py; this module wires arrivals,
the router and the closed loop of fixed-concurrency clients, and summarises the result.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools

import numpy as np

from distscope.errors import DistscopeError
from distscope.serve.engine import Ledger, ReplicaSim, Role
from distscope.serve.metrics import Slo, summarize
from distscope.serve.replica import Replica
from distscope.serve.requests import Workload, arrival_times, lengths
from distscope.serve.stack import Policy
from distscope.sim.loop import EventLoop

MAX_GPUS = 65_536


class Router(enum.Enum):
    ROUND_ROBIN = "round-robin"
    LEAST_LOADED = "least-loaded"  # fewest outstanding requests (join the shortest queue)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SimResult:
    metrics: dict[str, float]
    arrival: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    inp: np.ndarray
    out: np.ndarray
    preemptions: int
    events: int


def check_fits(replica: Replica, inp: np.ndarray, out: np.ndarray) -> None:
    """The KV cache must hold the longest request alone (else the simulation could never finish it)."""
    mem = replica.memory
    i = int(np.argmax(inp + out))
    need = mem.blocks_for(int(inp[i] + out[i]))
    if need > mem.kv_blocks:
        raise DistscopeError(
            f"kv cache holds {mem.kv_tokens} tokens per replica ({mem.kv_budget_bytes / 2**30:.2f} GiB per GPU) but one "
            f"request needs {int(inp[i] + out[i])} (input_len={int(inp[i])}, output_len={int(out[i])}): "
            "raise --tp/--pp, quantise the KV cache (--kv fp8) or shorten the request")
    if replica.context is not None and int((inp + out).max()) > replica.context:
        j = int(np.argmax(inp + out))
        raise DistscopeError(f"input_len={int(inp[j])} + output_len={int(out[j])} exceeds model {replica.spec.name}'s "
                             f"context of {replica.context} tokens")


def kv_transfer_s(prefill: Replica, decode: Replica, tokens: int) -> float:
    """Moving one request's KV cache from a prefill replica to a decode replica: every GPU sends its
    shard at once over the link the two pools share (the node's NVLink when both fit in one node,
    else the network): α + tokens · KV bytes per token per GPU / B."""
    c = prefill.cluster
    both = prefill.layout.gpus + decode.layout.gpus
    lv = c.levels[0] if both <= c.levels[0].size or len(c.levels) == 1 else c.levels[-1]
    return lv.latency_s + tokens * prefill.memory.kv_bytes_per_token / lv.eff_Bps


def simulate(replica: Replica, workload: Workload, *, replicas: int = 1, router: Router = Router.ROUND_ROBIN,
             policy: Policy | None = None, slo: Slo | None = None, reserve_full: bool | None = None,
             decode_replica: Replica | None = None, decode_replicas: int = 0) -> SimResult:
    """Serve `workload` on `replicas` copies of `replica` behind `router`; with decode_replicas > 0 the
    copies of `replica` only prefill and hand each request to a pool of `decode_replica`s (disaggregated
    prefill/decode)."""
    if replicas < 1 or decode_replicas < 0:
        raise DistscopeError(f"replicas={replicas}, decode_replicas={decode_replicas}: need at least one replica")
    gpus = (replicas + decode_replicas) * replica.layout.gpus
    if gpus > MAX_GPUS:
        raise DistscopeError(f"replicas={replicas + decode_replicas} of {replica.layout.gpus} GPUs: {gpus:,} GPUs exceed the "
                             f"{MAX_GPUS:,} serve simulates")
    if decode_replicas and policy is Policy.STATIC:
        raise DistscopeError("--scheduler static cannot feed a disaggregated decode pool: a prefill pool schedules continuously")
    inp, out = lengths(workload)
    check_fits(replica, inp, out)
    dec = decode_replica or replica
    if decode_replicas:
        check_fits(dec, inp, out)
    led = Ledger(inp, out)
    loop = EventLoop()
    sims: list[ReplicaSim] = []
    times = arrival_times(workload)
    n = len(inp)
    issued = itertools.count()
    rr = itertools.count()

    def route(rid: int) -> None:
        led.arrival[rid] = loop.now
        start = next(rr) % len(sims)
        if router is Router.ROUND_ROBIN or len(sims) == 1:
            sims[start].submit(rid)
        else:  # fewest outstanding requests; ties broken round-robin
            k = len(sims)
            min((sims[(start + i) % k] for i in range(k)), key=lambda s: s.outstanding).submit(rid)

    def on_finish(_rid: int) -> None:
        if times is None:
            nxt = next(issued)
            if nxt < n:
                loop.at(loop.now, lambda: route(nxt))

    dsims: list[ReplicaSim] = []
    drr = itertools.count()

    def handoff(rid: int) -> None:
        delay = kv_transfer_s(replica, dec, led.inp[rid] + led.done[rid])
        start = next(drr) % len(dsims)
        if router is Router.ROUND_ROBIN:
            target = dsims[start]
        else:
            k = len(dsims)
            target = min((dsims[(start + i) % k] for i in range(k)), key=lambda s: s.outstanding)
        loop.at(loop.now + delay, lambda: target.submit(rid))

    if decode_replicas:
        sims.extend(ReplicaSim(loop, replica, led, on_finish, policy, reserve_full, Role.PREFILL, handoff)
                    for _ in range(replicas))
        dsims.extend(ReplicaSim(loop, dec, led, on_finish, None, reserve_full, Role.DECODE) for _ in range(decode_replicas))
    else:
        sims.extend(ReplicaSim(loop, replica, led, on_finish, policy, reserve_full) for _ in range(replicas))
    if times is None:
        for _ in range(min(workload.concurrency, n)):
            rid = next(issued)
            loop.at(0.0, lambda rid=rid: route(rid))  # type: ignore[misc]
    else:
        # arrivals are scheduled lazily, one ahead, so the heap stays small
        def arrive(i: int) -> None:
            route(i)
            if i + 1 < n:
                loop.at(float(times[i + 1]), lambda: arrive(i + 1), priority=-1)

        loop.at(float(times[0]), lambda: arrive(0), priority=-1)
    loop.run()
    arr = np.array(led.arrival)
    first, finish = np.array(led.first), np.array(led.finish)
    metrics = summarize(arr, first, finish, out, slo)
    metrics["preemptions"] = float(led.preemptions)
    return SimResult(metrics=metrics, arrival=arr, first=first, finish=finish, inp=inp, out=out,
                     preemptions=led.preemptions, events=loop.events)


