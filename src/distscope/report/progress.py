"""Progress bars for long work: rich, on stderr, with an ETA; silent when stderr is not a terminal.

    with progress(total, "reading traces") as advance:
        for ... : advance()          # advance(n) for n units; advance.update(done, total) sets both

`total=None` shows a spinner with the elapsed time until a total is set. Core code takes a plain
callback so it never imports rich: per item (`on_rank()`: pass `advance`) or, where only the library
knows the total, `Progress` (done, total: pass `advance.update`). Update per batch of work (a layout, a
file, 32k simulator events), not per evaluation in a hot loop. DISTSCOPE_PROGRESS=1 forces bars on
(e.g. in CI logs), =0 forces them off.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

Progress = Callable[[int, int], None]  # library callback: (units done, units in all)


def enabled() -> bool:
    flag = os.environ.get("DISTSCOPE_PROGRESS")
    return flag == "1" if flag in ("0", "1") else sys.stderr.isatty()


class Bar:
    """What `progress()` yields: call it to advance; `update`, `describe`; a no-op when not shown."""

    __slots__ = ("_bar", "_task")

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar, self._task = bar, task

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def __call__(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def update(self, done: float, total: float | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, **({} if total is None else {"total": total}))

    def describe(self, description: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=description)


@contextlib.contextmanager
def progress(total: int | None, description: str) -> Iterator[Bar]:
    if not enabled():
        yield Bar()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    cols = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*cols, console=Console(stderr=True), transient=True, refresh_per_second=4) as bar:
        yield Bar(bar, bar.add_task(description, total=total))
