"""Run a sweep: expand the grid, skip what the output already holds, run the rest on an engine while
journaling each finished batch, then build the table and write the output atomically (store.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from distscope.explore.formats import encode
from distscope.explore.point import PlanSettings, Point
from distscope.explore.store import Store
from distscope.explore.sweep import Sweep, sweep_json
from distscope.explore.table import build, check_prices
from distscope.report.progress import progress

Results = list[tuple[str, dict[str, Any]]]


class Engine(Protocol):
    @property
    def name(self) -> str: ...

    def run(self, todo: list[tuple[str, Point]], settings: PlanSettings) -> Iterable[Results]: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    doc: dict[str, Any]  # table.build's rows, fronts and picks
    sweep: dict[str, Any]  # the sweep's description
    total: int  # grid points
    resumed: int  # distinct points whose result was already in the output or its journal
    computed: int  # distinct points planned by this run
    wall_s: float


def run_sweep(sweep: Sweep, engine: Engine, *, out: Path | None = None, fresh: bool = False,
              show_progress: bool = True) -> Outcome:
    t0 = time.perf_counter()
    points = sweep.points()
    if sweep.objectives.price.per_unit:
        check_prices(sweep, points)
    keys = [p.key(sweep.plan) for p in points]
    store = Store(out, fresh=fresh) if out is not None else None
    done = store.load() if store is not None else {}
    todo = list({k: p for k, p in zip(keys, points, strict=True) if k not in done}.items())
    results = {k: done[k] for k in keys if k in done}
    resumed = len(results)
    with contextlib.ExitStack() as stack:
        if store is not None:
            store.open()
            stack.callback(store.close)
        advance = (stack.enter_context(progress(len(todo), f"explore on {engine.name}"))
                   if show_progress and todo else (lambda n=1: None))
        batches = engine.run(todo, sweep.plan)
        # a generator engine cleans up (workers, a Ray instance it started) when closed: close it here, on
        # an error or Ctrl-C in this loop too, not whenever the traceback that holds its frame is freed
        stack.callback(getattr(batches, "close", lambda: None))
        for batch in batches:
            if store is not None:
                store.append(batch)
            results.update(batch)
            advance(len(batch))
    doc = build(sweep, points, results)
    desc = sweep_json(sweep)
    if store is not None:
        store.finish(encode(store.fmt, doc, desc))
    return Outcome(doc=doc, sweep=desc, total=len(points), resumed=resumed, computed=len(todo),
                   wall_s=time.perf_counter() - t0)
