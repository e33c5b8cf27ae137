"""How layers map to pipeline stages: pp·vp model chunks, stage i holding chunks i, i+pp, i+2pp, ...
(Megatron's interleaving), or the V of ZB-V and the mirrored pair of DualPipe (plan.Placement).

Layers are counted from the embedding side; the first `moe.dense_layers` layers of a MoE model are
dense. Stage 0 also holds the embedding, stage pp-1 the final norm, LM head and loss, and any
multi-token-prediction layers.
"""

from __future__ import annotations

import dataclasses
import functools

from distscope.errors import DistscopeError
from distscope.plan import Placement, chunk_rank


@dataclasses.dataclass(frozen=True, slots=True)
class StageLayers:
    dense: int
    moe: int

    @property
    def total(self) -> int:
        return self.dense + self.moe


def chunk_sizes(layers: int, pp: int, vp: int, explicit: tuple[int, ...] = ()) -> tuple[int, ...]:
    """Layers per model chunk: the explicit split, else an even one. An uneven count without a split is refused
    (Plan.check does so for the verbs; a direct API call would otherwise price fewer layers than the model has)."""
    if explicit:
        return explicit
    if layers % (pp * vp):
        raise DistscopeError(f"layers={layers} not divisible by pp*vp={pp * vp}: give the plan's stage_layers "
                             f"(e.g. stages.balanced_chunks)")
    return (layers // (pp * vp),) * (pp * vp)


def balanced_chunks(layers: int, pp: int, vp: int) -> tuple[int, ...]:
    """Layers per model chunk: () when they divide evenly (uniform). Otherwise Megatron-Core's
    `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split`: the embedding
    and the loss each count as one layer, so (layers + 2) / (pp·vp) per chunk with one fewer in the
    first and the last chunk (Llama 3.1 405B: 126 layers on pp=16: 7, 8 x 14, 7; with vp=8 the first
    chunk holds the embedding alone, as Megatron allows). With only the loss accounted for (the LM
    head is the heavier end), (layers + 1) / (pp·vp) with one fewer in the last chunk. Else the
    remainder is spread over the middle chunks (Megatron's --pipeline-model-parallel-layout). Empty
    when there are fewer layers than chunks."""
    n = pp * vp
    if layers % n == 0 or layers + 2 < n:
        return ()
    if (layers + 2) % n == 0 and n > 1 and (vp > 1 or layers + 2 > n):
        per = (layers + 2) // n
        return (per - 1,) + (per,) * (n - 2) + (per - 1,)
    if (layers + 1) % n == 0 and n > 1 and (vp > 1 or layers + 1 > n):
        per = (layers + 1) // n
        return (per,) * (n - 1) + (per - 1,)
    if layers < n:
        return ()
    per, rem = divmod(layers, n)
    return tuple(per + (1 if 0 < i <= rem else 0) for i in range(n))


def first_last_chunks(layers: int, pp: int, vp: int, first: int | None, last: int | None) -> tuple[int, ...]:
    """Layers per model chunk under Megatron's `--decoder-first-pipeline-num-layers F` and
    `--decoder-last-pipeline-num-layers L` (megatron/core/transformer/transformer_layer.py,
    get_transformer_layer_offset and get_num_layers_to_build): the first (last) pipeline rank holds F
    (L) layers, F/vp in each of its vp chunks; the remaining layers split evenly over the other ranks
    and their chunks. Megatron's divisibility rules are one-line errors here."""
    if pp < 2:
        raise DistscopeError(f"first_stage_layers/last_stage_layers need pp > 1, got pp={pp}")
    middle_ranks = pp - (first is not None) - (last is not None)
    f, lst = first or 0, last or 0
    for name, v in (("first_stage_layers", first), ("last_stage_layers", last)):
        if v is not None and (v < 0 or v % vp):
            raise DistscopeError(f"{name}={v} must be >= 0 and divisible by vp={vp} (Megatron splits it over the "
                                 f"rank's vp chunks)")
    rest = layers - f - lst
    if rest < 0 or (middle_ranks == 0 and rest) or (middle_ranks and rest % (middle_ranks * vp)):
        raise DistscopeError(f"first_stage_layers={first} last_stage_layers={last}: the other {rest} layers must "
                             f"split evenly over {middle_ranks} middle ranks x vp={vp} chunks (layers={layers}, pp={pp})")
    mid = rest // (middle_ranks * vp) if middle_ranks else 0
    out = []
    for _ in range(vp):
        for r in range(pp):
            out.append(f // vp if r == 0 and first is not None else lst // vp if r == pp - 1 and last is not None else mid)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def stage_layers(layers: int, dense_first: int, pp: int, vp: int, explicit: tuple[int, ...] = (),
                 placement: Placement = Placement.LOOP, mtp: int = 0) -> tuple[StageLayers, ...]:
    """Dense and MoE layer counts per pipeline rank (with MIRROR: both stages a rank holds). `mtp`
    multi-token-prediction layers, of the last layer's kind, run after the last chunk on its rank
    (Megatron builds the MTP block in the post-process stage)."""
    chunks = chunk_sizes(layers, pp, vp, explicit)
    dense = [0] * pp
    moe = [0] * pp
    start = 0
    for c, n in enumerate(chunks):
        d = max(0, min(start + n, dense_first) - start)
        ranks = (c, pp - 1 - c) if placement is Placement.MIRROR else (chunk_rank(c, pp, placement),)
        for i in ranks:
            dense[i] += d
            moe[i] += n - d
        start += n
    if mtp:
        c = len(chunks) - 1
        for i in (c, pp - 1 - c) if placement is Placement.MIRROR else (chunk_rank(c, pp, placement),):
            if layers > dense_first:
                moe[i] += mtp
            else:
                dense[i] += mtp
    return tuple(StageLayers(dense=dense[i], moe=moe[i]) for i in range(pp))
