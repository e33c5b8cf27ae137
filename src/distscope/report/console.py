"""One rich console for all commands (stdout for results, stderr for progress)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def print_json(obj: Any) -> None:
    """Plain JSON on stdout (no rich markup), so it pipes into jq and json.loads."""
    print(json.dumps(obj, indent=1, default=str))


def gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def secs(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.1f} us"
