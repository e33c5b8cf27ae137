"""Label process groups by parallelism dimension (dp/tp/pp/cp/ep...).

Two sources, explicit first:
- an explicit mapping {dim: [[ranks of one group], ...]},
  e.g. {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]};
- DeviceMeshes with `mesh_dim_names`: the group of mesh dim "tp" is labelled "tp".
A group matching neither is "world" when it spans every rank, else "group[r0,r1,...]".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from distscope.errors import DistscopeError


def parse_dim_map(text: str) -> dict[str, list[list[int]]]:
    """'tp=0,1|2,3;dp=0,2|1,3' -> {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]}."""
    out: dict[str, list[list[int]]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        dim, sep, groups = part.partition("=")
        if not sep or not dim.strip():
            raise DistscopeError(f"dims={text!r}: expected 'dim=r,r|r,r;dim=...', got {part!r}")
        try:
            out[dim.strip()] = [[int(r) for r in g.split(",")] for g in groups.split("|")]
        except ValueError:
            raise DistscopeError(f"dims={text!r}: ranks in {part!r} must be integers") from None
    return out


class GroupLabeler:
    """Resolves (group name, group ranks) to a dimension label; results are cached per group name."""

    def __init__(
        self,
        *,
        dims: Mapping[str, Sequence[Sequence[int]]] | None = None,
        meshes: Iterable[Any] = (),
        world_size: int | None = None,
    ) -> None:
        self._by_ranks: dict[tuple[int, ...], str] = {}
        for dim, groups in (dims or {}).items():
            for g in groups:
                self._by_ranks[tuple(g)] = dim
        self._meshes = list(meshes)
        self._world_size = world_size
        self._cache: dict[str, str] = {}

    def set_world_size(self, world_size: int) -> None:
        self._world_size = world_size
        self._cache.clear()

    def add_mesh(self, mesh: Any) -> None:
        self._meshes.append(mesh)
        self._cache.clear()

    def label(self, group_name: str, ranks: tuple[int, ...]) -> str:
        if group_name in self._cache:
            return self._cache[group_name]
        dim = self._by_ranks.get(ranks) or self._from_meshes(group_name)
        if dim is None:
            dim = (
                "world"
                if self._world_size is not None and len(ranks) == self._world_size
                else ("group[" + ",".join(map(str, ranks)) + "]")
            )
        self._cache[group_name] = dim
        return dim

    def _from_meshes(self, group_name: str) -> str | None:
        for mesh in self._meshes:
            for name in getattr(mesh, "mesh_dim_names", None) or ():
                try:
                    if mesh.get_group(name).group_name == group_name:
                        return str(name)
                except (RuntimeError, KeyError, ValueError):  # dim not backed by a group on this rank
                    continue
        return None
