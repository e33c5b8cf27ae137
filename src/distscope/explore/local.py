"""The default engine: a process pool over this machine's cores (concurrent.futures).

Workers come from a fork server preloaded with the planner, so each starts warm and none is forked
from a process running threads (the progress bar's). With one worker, or one batch, the points run
in this process. Results come back batch by batch as they finish. A batch that makes no progress for
`stall_timeout_s` stops the sweep (the finished points are kept for a resume).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from distscope.errors import DistscopeError
from distscope.explore.batches import make_batches
from distscope.explore.point import PlanSettings, Point, run_batch
from distscope.search.parallel import cpu_count

PRELOAD = ["distscope.explore.point", "distscope.search.planner", "distscope.search.compression"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalEngine:
    workers: int = 0  # 0: one per core this process may run on
    stall_timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if not 0 <= self.workers <= 1024:
            raise DistscopeError(f"--workers={self.workers} must be in 0..1024 (0 = one per core)")

    @property
    def name(self) -> str:
        return f"local ({self.parallelism} process{'es' if self.parallelism > 1 else ''})"

    @property
    def parallelism(self) -> int:
        return self.workers or cpu_count()

    def run(self, todo: list[tuple[str, Point]], settings: PlanSettings) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        batches = make_batches(todo, self.parallelism)
        n = min(self.parallelism, len(batches))
        if n <= 1:
            for b in batches:
                yield run_batch(b, settings)
            return
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
        if ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(PRELOAD)
        ex = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
        finished = False
        try:
            pending = {ex.submit(run_batch, b, settings) for b in batches}
            while pending:
                done, pending = wait(pending, timeout=self.stall_timeout_s, return_when=FIRST_COMPLETED)
                if not done:
                    raise DistscopeError(f"no batch finished within {self.stall_timeout_s:.0f} s; stopped (finished "
                                         "points are kept: run again to resume)")
                for f in done:
                    yield f.result()
            finished = True
        except BrokenProcessPool as exc:
            raise DistscopeError(f"a worker process died ({exc}); finished points are kept: run again to resume") from None
        finally:
            if not finished:  # stopped early (error, interrupt): our workers go now, not after their batch
                for proc in list(getattr(ex, "_processes", {}).values()):
                    proc.terminate()
            ex.shutdown(wait=finished, cancel_futures=True)
