"""A capture at another data-parallel degree (trace/scale.py, `simulate CAP --dp N`)."""

from __future__ import annotations

import dataclasses

import pytest
from test_from_capture import _step  # pytest puts this folder on sys.path (rootdir-relative, no package)

from distscope.errors import DistscopeError
from distscope.trace.from_capture import build_rank
from distscope.trace.graph import CollKind, NodeKind
from distscope.trace.scale import scale_dp
from distscope.trace.traceset import TraceSet


def _captured() -> TraceSet:
    """Two ranks; group "0" is dp (all-reduce, 4096 B), group "1" is tp (all-gather, 4096 B shard)."""
    caps = [build_rank(_step(), r, "t", completion_s={("0", 3): 0.0035, ("1", 0): 0.0016}) for r in (0, 1)]
    return TraceSet(graphs={r: c.graph for r, c in enumerate(caps)}, process_groups=caps[0].groups,
                    group_labels=caps[0].labels)


def test_dp_groups_grow_and_tp_groups_keep_their_size() -> None:
    scaled, d = scale_dp(_captured(), 8)
    assert d == 2 and scaled.num_ranks == 8 and scaled.class_of == (0, 1, 0, 1, 0, 1, 0, 1)
    colls = {n.comm_kind: n for n in scaled.graphs[0].nodes if n.kind is NodeKind.COMM_COLL}
    ar, ag = colls[CollKind.ALL_REDUCE], colls[CollKind.ALL_GATHER]
    assert scaled.members(ar.pg_name, 0) == tuple(range(8)) and ar.comm_size_bytes == 4096  # the same bucket
    assert scaled.members(ag.pg_name, 0) == (0, 1) and ag.comm_size_bytes == 4096  # tp: as captured
    assert scale_dp(_captured(), 2)[0].num_ranks == 2  # its own degree: the capture as it is


def test_a_larger_dp_group_is_priced_as_one() -> None:
    from distscope.sim.api import simulate_traces
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.system.presets import get_cluster

    net = ClusterNetwork(get_cluster("dgx-h100", 16))
    base = simulate_traces(_captured(), net).step_time_s
    big = simulate_traces(scale_dp(_captured(), 16)[0], net).step_time_s
    assert big > base  # a 16-rank ring all-reduce of the same bucket across nodes takes longer


def test_what_cannot_be_scaled_is_one_line() -> None:
    with pytest.raises(DistscopeError, match=r"--dp=3 does not divide .* degree is 2"):
        scale_dp(_captured(), 3)
    with pytest.raises(DistscopeError, match="--dp=0 must be >= 1"):
        scale_dp(_captured(), 0)
    tp_only = _captured()
    tp_only = dataclasses.replace(tp_only, group_labels={k: "tp" for k in tp_only.group_labels})
    with pytest.raises(DistscopeError, match=r"no data-parallel group to grow .* TP or PP degree change"):
        scale_dp(tp_only, 4)
    from distscope.trace.graph import Node, RankGraph

    silent = TraceSet(graphs={0: RankGraph(rank=0, nodes=(Node(id=0, name="mm", kind=NodeKind.COMP, duration_s=1e-3),))})
    with pytest.raises(DistscopeError, match="no collectives"):
        scale_dp(silent, 4)
