"""A frozen dataclass that hashes its fields once: the cost functions' caches (functools.lru_cache on
layer_cost, head_cost, ...) hash the model, device and plan on every call, and a dataclass's generated
__hash__ walks every field (and nested dataclass) each time: ~1.7M hashes in one 25k-plan search.

The cached value is per process: it is dropped when the object is pickled (string hashes differ between
processes), so a plan sent to a Ray worker hashes afresh there.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")
_KEY = "_distscope_hash"


def cached_hash(cls: type[T]) -> type[T]:
    """Class decorator for a frozen dataclass (with a __dict__): its field hash, computed once."""
    field_hash = cls.__hash__

    def __hash__(self: Any) -> int:
        h: int | None = self.__dict__.get(_KEY)
        if h is None:
            h = field_hash(self)
            object.__setattr__(self, _KEY, h)
        return h

    def __getstate__(self: Any) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != _KEY}

    setattr(cls, "__hash__", __hash__)  # noqa: B010 (mypy refuses assigning a method)
    setattr(cls, "__getstate__", __getstate__)  # noqa: B010
    return cls
