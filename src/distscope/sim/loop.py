"""The discrete-event core: a heap of (time, priority, seq, callback), nothing else.

Deterministic by construction (SimPy core.py style): events at equal time run by priority, then in the
order they were scheduled (`seq`, a per-loop counter, never a global). The loop knows nothing about
ranks, streams or collectives.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

Callback = Callable[[], Any]


class EventLoop:
    """Run callbacks in (time, priority, seq) order; callbacks schedule further events."""

    __slots__ = ("_heap", "_seq", "events", "now")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Callback]] = []
        self._seq = 0
        self.now = 0.0
        self.events = 0

    def at(self, time: float, callback: Callback, priority: int = 0) -> None:
        """Schedule `callback` at absolute `time` (never in the past)."""
        if time < self.now:
            raise ValueError(f"event at t={time} is before now={self.now}")
        self._seq += 1
        heapq.heappush(self._heap, (time, priority, self._seq, callback))

    def after(self, delay: float, callback: Callback, priority: int = 0) -> None:
        self.at(self.now + delay, callback, priority)

    @property
    def pending(self) -> bool:
        return bool(self._heap)

    def run(self, max_events: int | None = None) -> float:
        """Process events until none remain (or `max_events` more have run, so a caller can report
        progress between batches); returns the time of the last one."""
        heap = self._heap
        pop = heapq.heappop
        if max_events is None:
            while heap:
                time, _, _, callback = pop(heap)
                self.now = time
                self.events += 1
                callback()
            return self.now
        stop = self.events + max_events
        while heap and self.events < stop:
            time, _, _, callback = pop(heap)
            self.now = time
            self.events += 1
            callback()
        return self.now
