"""Progress bars for long work: rich, on stderr, with an ETA; silent when stderr is not a terminal.

    with progress(total, "reading traces") as advance:
        for ... : advance()

`total=None` shows a spinner with the elapsed time. Core code takes a plain callback (`on_item`) so it
never imports rich; the CLI wires the bar to it. DISTSCOPE_PROGRESS=1 forces bars on (e.g. in CI
logs), =0 forces them off.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator


def enabled() -> bool:
    flag = os.environ.get("DISTSCOPE_PROGRESS")
    return flag == "1" if flag in ("0", "1") else sys.stderr.isatty()


@contextlib.contextmanager
def progress(total: int | None, description: str) -> Iterator[Callable[..., None]]:
    if not enabled():
        yield lambda n=1: None
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

    cols = ([TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
             TimeRemainingColumn()] if total else [SpinnerColumn(), TextColumn(description), TimeElapsedColumn()])
    with Progress(*cols, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
