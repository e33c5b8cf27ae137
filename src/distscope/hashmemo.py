"""Memoized hashes for the frozen config dataclasses that key the cost functions' caches.

`layer_cost`, `head_cost` and `group_net` are `lru_cache`d on (ModelSpec, Device, Cluster, ...), so
every estimate hashes those objects several times; a frozen dataclass recomputes its hash from all its
fields (enums included, whose `__hash__` is a Python call) on every lookup. Caching it on the instance
made a Llama 3 70B / 1,024-GPU plan search ~25% faster (benchmarks/explore_speed.py). The instance is
immutable, so its hash never changes; the memo is dropped on pickling because string hashes differ
between processes (PYTHONHASHSEED), so a copy sent to another process recomputes its own.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_SLOT = "_memo_hash"


def memo_hash(cls: type[T]) -> type[T]:
    """Class decorator, applied above @dataclass(frozen=True): cache the generated field hash."""
    field_hash = cls.__hash__

    def __hash__(self: Any) -> int:
        try:
            return int(self.__dict__[_SLOT])
        except KeyError:
            h = int(field_hash(self))
            object.__setattr__(self, _SLOT, h)
            return h

    def __getstate__(self: Any) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != _SLOT}

    setattr(cls, "__hash__", __hash__)  # noqa: B010 (mypy rejects assigning to a method)
    setattr(cls, "__getstate__", __getstate__)  # noqa: B010
    return cls
