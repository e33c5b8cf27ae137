"""Bandwidth sharing for `--network-mode shared`: max-min-free processor sharing per resource.

A transfer is a flow with `work_s` (its time when alone) on a set of resources, here (rank, network
level) pairs. While k flows use a resource, each progresses at 1/k there; a flow runs at the rate of its
most loaded resource. Rates change only when a flow starts or ends; stale finish events are dropped by a
per-flow version number.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from distscope.sim.loop import EventLoop


class _Flow:
    __slots__ = ("done", "rate", "remaining", "resources", "version")

    def __init__(self, work_s: float, resources: tuple[Hashable, ...], done: Callable[[], None]) -> None:
        self.remaining = work_s
        self.resources = resources
        self.done = done
        self.rate = 0.0
        self.version = 0


class FluidNetwork:
    def __init__(self, loop: EventLoop) -> None:
        self.loop = loop
        self.flows: set[_Flow] = set()
        self.load: dict[Hashable, int] = {}
        self.last = 0.0

    def start(self, work_s: float, resources: tuple[Hashable, ...], done: Callable[[], None]) -> None:
        if work_s <= 0 or not resources:
            self.loop.at(self.loop.now, done)
            return
        self._advance()
        flow = _Flow(work_s, resources, done)
        self.flows.add(flow)
        for r in resources:
            self.load[r] = self.load.get(r, 0) + 1
        self._rerate()

    def _advance(self) -> None:
        dt = self.loop.now - self.last
        if dt > 0:
            for f in self.flows:
                f.remaining -= f.rate * dt
        self.last = self.loop.now

    def _rerate(self) -> None:
        for f in self.flows:
            rate = 1.0 / max(self.load[r] for r in f.resources)
            if rate != f.rate:
                f.rate = rate
                f.version += 1
                self.loop.at(self.loop.now + max(f.remaining, 0.0) / rate, self._finisher(f, f.version))

    def _finisher(self, flow: _Flow, version: int) -> Callable[[], None]:
        def finish() -> None:
            if flow.version != version or flow not in self.flows:
                return
            self._advance()
            self.flows.discard(flow)
            for r in flow.resources:
                self.load[r] -= 1
            self._rerate()
            flow.done()

        return finish
