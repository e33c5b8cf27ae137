"""How layers map to pipeline stages: pp·vp model chunks, stage i holding chunks i, i+pp, i+2pp, ...

Layers are counted from the embedding side; the first `moe.dense_layers` layers of a MoE model are
dense. Stage 0 also holds the embedding, stage pp-1 the final norm, LM head and loss.
"""

from __future__ import annotations

import dataclasses
import functools


@dataclasses.dataclass(frozen=True, slots=True)
class StageLayers:
    dense: int
    moe: int

    @property
    def total(self) -> int:
        return self.dense + self.moe


def chunk_sizes(layers: int, pp: int, vp: int, explicit: tuple[int, ...] = ()) -> tuple[int, ...]:
    if explicit:
        return explicit
    per = layers // (pp * vp)
    return (per,) * (pp * vp)


def balanced_chunks(layers: int, pp: int, vp: int) -> tuple[int, ...]:
    """Layers per model chunk: () when they divide evenly (uniform). Otherwise Megatron-Core's
    `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split`: the embedding
    and the loss each count as one layer, so (layers + 2) / (pp·vp) per chunk with one fewer in the
    first and the last chunk (Llama 3.1 405B: 126 layers on pp=8, vp=8). Else the remainder is spread
    over the middle chunks. Empty when there are fewer layers than chunks."""
    n = pp * vp
    if layers % n == 0 or layers < n:
        return ()
    if (layers + 2) % n == 0 and n > 1:
        per = (layers + 2) // n
        return (per - 1,) + (per,) * (n - 2) + (per - 1,)
    per, rem = divmod(layers, n)
    return tuple(per + (1 if 0 < i <= rem else 0) for i in range(n))


@functools.lru_cache(maxsize=4096)
def stage_layers(layers: int, dense_first: int, pp: int, vp: int, explicit: tuple[int, ...] = ()) -> tuple[StageLayers, ...]:
    """Dense and MoE layer counts per pipeline stage."""
    chunks = chunk_sizes(layers, pp, vp, explicit)
    dense = [0] * pp
    moe = [0] * pp
    start = 0
    for c, n in enumerate(chunks):
        i = c % pp
        d = max(0, min(start + n, dense_first) - start)
        dense[i] += d
        moe[i] += n - d
        start += n
    return tuple(StageLayers(dense=dense[i], moe=moe[i]) for i in range(pp))
