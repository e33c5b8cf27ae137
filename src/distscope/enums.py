"""The enum base of the types the estimator hashes on its hot path (plan, dtype, collective kinds).

Members of a plain Enum are singletons compared by identity, so identity hashing is consistent with
==. enum.Enum hashes the member's name with a Python-level __hash__; object.__hash__ is a C slot. A
plan search hashes enums millions of times (cache keys, frozenset[Dim] membership, dict lookups):
about a tenth of its time went there.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from distscope.errors import DistscopeError, closest

EnumT = TypeVar("EnumT", bound=enum.Enum)


class Enum(enum.Enum):
    __hash__ = object.__hash__


def parse_list(cls: type[EnumT], text: str, flag: str, noun: str) -> list[EnumT]:
    """A comma list of `cls` values as a flag gives them (case and spaces ignored), or one line naming the
    first bad one, its closest values and every choice."""
    names = {str(m.value): m for m in cls}
    out = []
    for part in text.split(","):
        key = part.strip().lower()
        if key not in names:
            raise DistscopeError(f"{flag} {part.strip()!r} is not a {noun}{closest(key, names)}; "
                                 f"choose from {', '.join(names)}")
        out.append(names[key])
    return out
