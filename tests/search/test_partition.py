"""The min-max pipeline partition DP against brute force, and its use by the planner."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.errors import DistscopeError
from distscope.search.partition import layer_costs, min_max_partition, part_costs
from distscope.search.planner import stage_chunks


def brute_force(costs: list[float], parts: int, first: float, last: float, caps: list[int] | None) -> float | None:
    n = len(costs)
    best = None
    for cuts in itertools.combinations(range(1, n), parts - 1):
        sizes = [b - a for a, b in zip((0, *cuts), (*cuts, n), strict=True)]
        if caps is not None and any(s > c for s, c in zip(sizes, caps, strict=True)):
            continue
        v = max(part_costs(costs, sizes, first, last))
        best = v if best is None else min(best, v)
    return best


costs_st = st.lists(st.floats(min_value=0.0, max_value=10.0, allow_nan=False), min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(costs=costs_st, data=st.data(), first=st.floats(0, 5), last=st.floats(0, 5))
def test_dp_matches_brute_force(costs: list[float], data: st.DataObject, first: float, last: float) -> None:
    parts = data.draw(st.integers(1, len(costs)))
    caps = data.draw(st.one_of(st.none(), st.lists(st.integers(1, len(costs)), min_size=parts, max_size=parts)))
    expected = brute_force(costs, parts, first, last, caps)
    if expected is None:
        with pytest.raises(DistscopeError):
            min_max_partition(costs, parts, first_extra=first, last_extra=last, max_items=caps)
        return
    got = min_max_partition(costs, parts, first_extra=first, last_extra=last, max_items=caps)
    assert sum(got.sizes) == len(costs) and min(got.sizes) >= 1 and len(got.sizes) == parts
    if caps is not None:
        assert all(s <= c for s, c in zip(got.sizes, caps, strict=True))
    assert got.bottleneck_s == pytest.approx(expected, abs=1e-9)
    assert max(part_costs(costs, got.sizes, first, last)) == pytest.approx(expected, abs=1e-9)


def test_heavy_head_moves_layers_off_the_last_stage() -> None:
    # 32 unit layers on 4 stages, LM head worth 4 layers: uniform 8/8/8/8 has a 12-unit last stage
    got = min_max_partition([1.0] * 32, 4, last_extra=4.0)
    assert got.sizes[-1] < 8 and got.bottleneck_s == 9.0
    assert max(part_costs([1.0] * 32, (8, 8, 8, 8), 0.0, 4.0)) == 12.0


def test_bad_inputs_raise_one_line_errors() -> None:
    with pytest.raises(DistscopeError, match="parts=5"):
        min_max_partition([1.0] * 4, 5)
    with pytest.raises(DistscopeError, match=">= 0"):
        min_max_partition([1.0, -1.0], 1)
    with pytest.raises(DistscopeError, match="max_items"):
        min_max_partition([1.0] * 4, 2, max_items=[1])


def test_layer_costs_dense_then_moe() -> None:
    assert layer_costs(4, 1, 1.0, 3.0) == [1.0, 3.0, 3.0, 3.0]


@given(totals=st.lists(st.integers(1, 12), min_size=1, max_size=6), vp=st.integers(1, 4))
def test_stage_chunks_realises_stage_totals(totals: list[int], vp: int) -> None:
    chunks = stage_chunks(tuple(totals), vp)
    if min(totals) < vp:
        assert chunks is None
        return
    assert chunks is not None and min(chunks) >= 1
    pp = len(totals)
    assert [sum(chunks[i::pp]) for i in range(pp)] == totals
    for i in range(pp):
        assert max(chunks[i::pp]) - min(chunks[i::pp]) <= 1
