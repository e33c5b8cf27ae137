"""A progress bar with an ETA on stderr, for the sweep (rich; hidden when stderr is not a terminal).

Same shape as the shared `progress(total, description)` context manager the report package is
getting: the body calls `advance(n)` as work finishes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from distscope.report.console import err


@contextlib.contextmanager
def progress(total: int, description: str) -> Iterator[Callable[[int], None]]:
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), console=err, transient=True, disable=not err.is_terminal)
    with bar:
        task = bar.add_task(description, total=total)
        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
