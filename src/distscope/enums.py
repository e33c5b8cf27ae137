"""The enum base of the types the estimator hashes on its hot path (plan, dtype, collective kinds).

Members of a plain Enum are singletons compared by identity, so identity hashing is consistent with
==. enum.Enum hashes the member's name with a Python-level __hash__; object.__hash__ is a C slot. A
plan search hashes enums millions of times (cache keys, frozenset[Dim] membership, dict lookups):
about a tenth of its time went there.
"""

from __future__ import annotations

import enum


class Enum(enum.Enum):
    __hash__ = object.__hash__
