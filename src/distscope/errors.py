"""The one exception type distscope raises for bad user input.

The CLI catches it and prints its message on one line (no traceback). Every message names the field
and the value, and where it helps, the closest valid choices.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable


class DistscopeError(ValueError):
    """Bad input: a one-line message naming the field and the value."""


def closest(value: str, choices: Iterable[str], n: int = 3) -> str:
    """'; closest: a, b, c' for an error message, or '' when nothing is close."""
    found = difflib.get_close_matches(value, list(choices), n=n, cutoff=0.4)
    return f"; closest: {', '.join(found)}" if found else ""


def warn(message: str) -> None:
    """A suspicious but legal input: one line on stderr, and the command goes on."""
    print(f"distscope: warning: {' '.join(message.split())}", file=sys.stderr)
