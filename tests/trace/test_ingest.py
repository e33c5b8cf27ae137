"""Reading Chakra ET as real converters write it (hand-made edge cases, mlc-chakra's protobuf schema):
METADATA nodes kept at zero time, dangling dependencies tolerated and counted, nesting never counted
twice, thread/stream lanes overlapping, process groups from PyTorch's `process_group:init` node, and
one-line errors for truncated files, other Chakra/PyTorch versions and missing ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distscope.errors import DistscopeError
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.trace.chakra_io import read_rank, read_traces
from distscope.trace.graph import NodeKind

pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")
protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")
SCHEMA = "1.1.1-chakra.0.0.4"


def _node(nid: int, name: str, typ: int | None = None, *, dur_us: int = 0, data: tuple[int, ...] = (),
          ctrl: tuple[int, ...] = (), **attrs: Any) -> Any:
    n = pb.Node(id=nid, name=name, type=pb.COMP_NODE if typ is None else typ, duration_micros=dur_us)
    n.data_deps.extend(data)
    n.ctrl_deps.extend(ctrl)
    for key, value in attrs.items():
        if isinstance(value, bool):
            n.attr.append(pb.AttributeProto(name=key, bool_val=value))
        elif isinstance(value, int):
            n.attr.append(pb.AttributeProto(name=key, int64_val=value))
        else:
            n.attr.append(pb.AttributeProto(name=key, string_val=str(value)))
    return n


def _write(path: Path, nodes: list[Any], *, schema: str | None = SCHEMA, version: str = "") -> Path:
    gm = pb.GlobalMetadata(version=version or ("1.0.0" if schema is None else ""))
    if schema is not None:
        gm.attr.append(pb.AttributeProto(name="schema", string_val=schema))
    with path.open("wb") as fh:
        protolib.encodeMessage(fh, gm)
        for n in nodes:
            protolib.encodeMessage(fh, n)
    return path


def _pg_init(nid: int, groups: list[dict[str, Any]]) -> Any:
    n = _node(nid, "## process_group:init ##", pb.METADATA_NODE)
    n.inputs.values = str([json.dumps(groups)])  # the converter stores the repr of the value list
    return n


def _net(n: int) -> ClusterNetwork:
    from distscope.scenario import SystemFlags, build_cluster

    return ClusterNetwork(build_cluster(SystemFlags(cluster="dgx-h100", gpus=8)))


def test_metadata_kept_at_zero_time_and_dangling_deps_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "t.0.et", [
        _pg_init(3, [{"pg_name": "0", "ranks": [], "group_size": 1}]),
        _node(4, "aten::mm", dur_us=100, data=(3,), ctrl=(2,), tid=1),  # 2: a root the converter dropped
        _node(5, "aten::add", dur_us=50, data=(4, 77), tid=1),
    ])
    graph, groups = read_rank(path, 0, world=1)
    assert [n.kind for n in graph.nodes] == [NodeKind.METADATA, NodeKind.COMP, NodeKind.COMP]
    assert graph.nodes[0].duration_s == 0 and graph.nodes[1].data_deps == (3,) and graph.nodes[1].ctrl_deps == ()
    assert groups == {"0": (0,)}
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"distscope: warning: trace file {str(path)!r}: 2 dependencies name nodes absent from the file "
                   "(e.g. node 4 -> 2); treated as satisfied"]
    res = simulate_traces(read_traces(tmp_path / "t"), _net(1))
    assert res.step_time_s == pytest.approx(150e-6)


def test_nesting_is_never_counted_twice(tmp_path: Path) -> None:
    # exclusive times (mlc-chakra's converter): the caller's own 30 us count, beside its callees' 100 us
    excl = _write(tmp_path / "e.0.et", [
        _node(1, "aten::linear", dur_us=30, tid=1),
        _node(2, "aten::t", dur_us=20, data=(1,), ctrl=(1,), tid=1),
        _node(3, "aten::addmm", dur_us=80, data=(2,), ctrl=(1,), tid=1),
    ])
    assert [n.duration_s for n in read_rank(excl, 0)[0].nodes] == pytest.approx([30e-6, 20e-6, 80e-6])
    # inclusive times (the caller's covers its callees'): only the leaves take time
    incl = _write(tmp_path / "i.0.et", [
        _node(1, "aten::linear", dur_us=130, tid=1),
        _node(2, "aten::t", dur_us=20, data=(1,), ctrl=(1,), tid=1),
        _node(3, "aten::addmm", dur_us=80, data=(2,), ctrl=(1,), tid=1),
    ])
    assert [n.duration_s for n in read_rank(incl, 0)[0].nodes] == pytest.approx([0.0, 20e-6, 80e-6])
    # a trace not derived from PyTorch (no schema): ctrl_deps are plain ordering, times stay
    plain = _write(tmp_path / "p.0.et", [_node(1, "a", dur_us=130), _node(2, "b", dur_us=20, ctrl=(1,))], schema=None)
    assert [n.duration_s for n in read_rank(plain, 0)[0].nodes] == pytest.approx([130e-6, 20e-6])


def test_threads_and_streams_overlap_as_in_the_job(tmp_path: Path) -> None:
    _write(tmp_path / "t.0.et", [
        _node(1, "main_a", dur_us=100, tid=1),
        _node(2, "main_b", dur_us=100, tid=1),  # same thread as main_a: runs after it
        _node(3, "worker", dur_us=150, tid=2),  # another thread: overlaps
        _node(4, "kernel", dur_us=120, is_cpu_op=False, stream=7, tid=1),  # a device stream: overlaps
    ])
    graph = read_traces(tmp_path / "t").graphs[0]
    assert [n.lane for n in graph.nodes] == ["tid:1", "tid:1", "tid:2", "stream:7"]
    assert simulate_traces(read_traces(tmp_path / "t"), _net(1)).step_time_s == pytest.approx(200e-6)


def test_process_groups_from_pytorch_metadata(tmp_path: Path) -> None:
    for r in range(4):
        _write(tmp_path / f"t.{r}.et", [
            _pg_init(1, [{"pg_name": "0", "ranks": [], "group_size": 4},
                         {"pg_name": "1", "ranks": [0, 1] if r < 2 else [2, 3], "group_size": 2}]),
            _node(2, "ncclDevKernel_AllReduce", pb.COMM_COLL_NODE, data=(1,), is_cpu_op=False,
                  comm_type=pb.ALL_REDUCE, comm_size=1 << 20, pg_name="1"),
        ])
    with pytest.raises(DistscopeError, match="field pg:1 lists ranks"):
        read_traces(tmp_path / "t")  # pg "1" cannot be {0,1} on one rank and {2,3} on another
    for r in range(4):
        _write(tmp_path / f"u.{r}.et", [
            _pg_init(1, [{"pg_name": "0", "ranks": [], "group_size": 4}, {"pg_name": "1", "ranks": [0, 1]},
                         {"pg_name": "2", "ranks": [2, 3]}]),
            _node(2, "ncclDevKernel_AllReduce", pb.COMM_COLL_NODE, data=(1,), is_cpu_op=False,
                  comm_type=pb.ALL_REDUCE, comm_size=1 << 20, pg_name="1" if r < 2 else "2"),
        ])
    traces = read_traces(tmp_path / "u")
    assert traces.process_groups == {"0": (0, 1, 2, 3), "1": (0, 1), "2": (2, 3)}
    assert simulate_traces(traces, _net(4)).step_time_s > 0


def test_bad_traces_are_one_line_naming_file_and_node(tmp_path: Path) -> None:
    good = _write(tmp_path / "g.0.et", [_node(1, "a", dur_us=5, tid=1), _node(2, "b", dur_us=5, data=(1,), tid=1),
                                        _node(3, "c", dur_us=5, data=(2,), tid=1)])
    data = good.read_bytes()
    (tmp_path / "cut.0.et").write_bytes(data[:-4])
    with pytest.raises(DistscopeError, match=r"trace file '.*cut.0.et': truncated or corrupt after node 2 \('b'\)"):
        read_traces(tmp_path / "cut")
    _write(tmp_path / "v.0.et", [_node(1, "a")], schema=None, version="2.0.0")
    with pytest.raises(DistscopeError, match=r"v.0.et', GlobalMetadata: version='2.0.0' is a Chakra ET version"):
        read_traces(tmp_path / "v")
    _write(tmp_path / "s.0.et", [_node(1, "a")], schema="2.0.0-chakra.9.9.9")
    with pytest.raises(DistscopeError, match=r"s.0.et', GlobalMetadata: schema='2.0.0-chakra.9.9.9' comes from"):
        read_traces(tmp_path / "s")
    bad = _node(7, "x")
    bad.type = 99
    _write(tmp_path / "k.0.et", [bad])
    with pytest.raises(DistscopeError, match=r"k.0.et', rank 0, node 7 \('x'\): field type=99"):
        read_traces(tmp_path / "k")
    for r in range(3):  # ranks 0-2 of a 4-rank job: the group names the missing rank
        _write(tmp_path / f"m.{r}.et", [_pg_init(1, [{"pg_name": "0", "ranks": [0, 1, 2, 3]}])])
    with pytest.raises(DistscopeError, match=r"missing rank 3: process group '0' lists it but there is no m.3.et"):
        read_traces(tmp_path / "m")
