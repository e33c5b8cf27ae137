"""A set of per-rank graphs plus process-group membership: what `distscope simulate` runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from distscope.errors import DistscopeError
from distscope.trace.graph import RankGraph


@dataclass(frozen=True, kw_only=True)
class TraceSet:
    """Graphs by rank (ranks 0..N-1) and explicit process groups (name -> member ranks).

    A collective's group is resolved by `members`: an explicit group of that name; else, for an empty
    `pg_name`, every rank (the world group, as for `chakra_generator` microbenchmarks); else the ranks
    whose traces use that name (one group per name).
    """

    graphs: dict[int, RankGraph]
    process_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Optional parallelism label of a group (dp, tp, pp, ...), e.g. from a captured job's DeviceMesh.
    group_labels: dict[str, str] = field(default_factory=dict)
    # Symmetric trace sets: the representative rank of every rank; `graphs` then holds only the
    # representatives, and every other rank runs its representative's graph.
    class_of: tuple[int, ...] | None = None

    def group_dtypes(self) -> dict[str, str]:
        """The payload dtype of each process group's collectives, as its traces record it (the first one seen)."""
        out: dict[str, str] = {}
        for g in self.graphs.values():
            for n in g.nodes:
                if n.pg_name and n.comm_dtype:
                    out.setdefault(n.pg_name, n.comm_dtype)
        return out

    def __post_init__(self) -> None:
        if not self.graphs:
            raise DistscopeError("trace set: no ranks")
        ranks = sorted(self.graphs)
        if self.class_of is not None:
            reps = sorted(set(self.class_of))
            if reps != ranks or any(self.class_of[r] != r for r in reps):
                raise DistscopeError(
                    f"symmetric trace set: representatives {reps[:8]} must be exactly the traced ranks {ranks[:8]}"
                )
        elif ranks != list(range(len(ranks))):
            raise DistscopeError(f"trace set: ranks must be 0..{len(ranks) - 1}; got {ranks[:8]}...")
        for name, members in self.process_groups.items():
            bad = [r for r in members if not 0 <= r < self.num_ranks]
            if bad or len(set(members)) != len(members) or not members:
                raise DistscopeError(f"process group {name!r}: members {list(members)} must be distinct ranks")
        object.__setattr__(self, "_users", None)

    @property
    def num_ranks(self) -> int:
        return len(self.graphs) if self.class_of is None else len(self.class_of)

    def members(self, pg_name: str, rank: int) -> tuple[int, ...]:
        """Ranks of the group `pg_name` as seen from `rank` (which must be a member)."""
        if pg_name in self.process_groups:
            group = self.process_groups[pg_name]
        elif pg_name == "":
            group = self._world()
        else:
            users = self._pg_users()
            group = users[pg_name]
        if not 0 <= rank < self.num_ranks or (group is not self._world() and rank not in group):
            raise DistscopeError(f"rank {rank}: field pg_name={pg_name!r} names a group without this rank")
        return group

    def _world(self) -> tuple[int, ...]:
        world: tuple[int, ...] | None = getattr(self, "_world_ranks", None)
        if world is None:
            world = tuple(range(self.num_ranks))
            object.__setattr__(self, "_world_ranks", world)
        return world

    def _pg_users(self) -> dict[str, tuple[int, ...]]:
        users: dict[str, tuple[int, ...]] | None = getattr(self, "_users", None)
        if users is None:
            acc: dict[str, list[int]] = {}
            for rank, graph in self.graphs.items():
                for name in {n.pg_name for n in graph.nodes if n.pg_name}:
                    acc.setdefault(name, []).append(rank)
            users = {k: tuple(sorted(v)) for k, v in acc.items()}
            object.__setattr__(self, "_users", users)
        return users
