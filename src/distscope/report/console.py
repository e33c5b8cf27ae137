"""One rich console for all commands (stdout for results, stderr for progress)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

# Piped output (grep, a file, CI logs) is not wrapped at rich's 80-column default, which cut catalog
# keys to "gpt-…"; a terminal keeps its own width.
PIPE_WIDTH = 200
out = Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)
err = Console(stderr=True, highlight=False)


def print_json(obj: Any) -> None:
    """Plain JSON on stdout (no rich markup), so it pipes into jq and json.loads."""
    print(json.dumps(obj, indent=1, default=str))


def breakdown_table(title: str, breakdown_s: dict[str, float], step_s: float, *, ms: bool = False) -> Any:
    """A step's terms as a rich table: term, time (seconds, or ms), share of the step."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column("term")
    t.add_column("ms" if ms else "seconds", justify="right")
    t.add_column("share", justify="right")
    for k, v in breakdown_s.items():
        t.add_row(k, f"{v * 1e3:.3f}" if ms else f"{v:.4f}", f"{v / step_s:.1%}")
    return t


def gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def secs(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.1f} us"
