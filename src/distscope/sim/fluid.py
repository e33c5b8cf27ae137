"""Bandwidth sharing for `--network-mode shared`: max-min-free processor sharing per resource.

A transfer is a flow with `work_s` (its time when alone) on a set of resources, here (rank, network
level) pairs. While k flows use a resource, each progresses at 1/k there; a flow runs at the rate of its
most loaded resource. Rates change only when a flow starts or ends; stale finish events are dropped by a
per-flow version number.

Cost per start/end: only the flows sharing a resource with the flow that started or ended can change
rate (the loads of no other resource moved), so only they are re-rated, in start order; a flow's
progress is brought up to date only when its rate changes (remaining work falls linearly between
two changes). A step of DeepSeek-V3 on 256 GPUs keeps ~10 flows in flight and each shares a resource
with one or two others: re-rating every flow at every event was most of the simulation's time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable

from distscope.sim.loop import EventLoop


class _Flow:
    __slots__ = ("active", "done", "rate", "remaining", "resources", "seq", "since", "version")

    def __init__(self, work_s: float, resources: tuple[Hashable, ...], done: Callable[[], None], seq: int,
                 now: float) -> None:
        self.remaining = work_s  # work left at time `since`
        self.since = now
        self.resources = resources
        self.done = done
        self.rate = 0.0
        self.version = 0
        self.seq = seq  # start order: re-rating order, so equal-time finish events are deterministic
        self.active = True


class FluidNetwork:
    def __init__(self, loop: EventLoop) -> None:
        self.loop = loop
        self.users: dict[Hashable, dict[_Flow, None]] = {}  # resource -> flows on it (the load is its size)
        self._seq = itertools.count()

    def start(self, work_s: float, resources: tuple[Hashable, ...], done: Callable[[], None]) -> None:
        if work_s <= 0 or not resources:
            self.loop.at(self.loop.now, done)
            return
        flow = _Flow(work_s, resources, done, next(self._seq), self.loop.now)
        users = self.users
        for r in resources:
            on = users.get(r)
            if on is None:
                users[r] = {flow: None}
            else:
                on[flow] = None
        self._rerate(resources)

    def _rerate(self, changed: tuple[Hashable, ...]) -> None:
        """Re-rate the flows on the resources whose load just changed."""
        users = self.users
        touched: dict[_Flow, None] = {}
        for r in changed:
            touched.update(users[r])
        flows = sorted(touched, key=_start_order) if len(touched) > 1 else touched
        now = self.loop.now
        for f in flows:
            rate = 1.0 / max(len(users[r]) for r in f.resources)
            if rate != f.rate:
                f.remaining -= f.rate * (now - f.since)
                f.since = now
                f.rate = rate
                f.version += 1
                self.loop.at(now + max(f.remaining, 0.0) / rate, self._finisher(f, f.version))

    def _finisher(self, flow: _Flow, version: int) -> Callable[[], None]:
        def finish() -> None:
            if flow.version != version or not flow.active:
                return
            flow.active = False
            users = self.users
            for r in flow.resources:
                del users[r][flow]
            self._rerate(flow.resources)
            flow.done()

        return finish


def _start_order(f: _Flow) -> int:
    return f.seq
