"""trace/link.py: host execution trace + Kineto -> ET+ (the format chakra_trace_link writes), on
hand-made traces; mlc-chakra's own converter must accept the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distscope.errors import DistscopeError
from distscope.trace.link import THREAD_ROOT, exclusive_durations, link, node_attrs

SCHEMA = "1.1.1-chakra.0.0.4"


def _attrs(rf: int, tid: int = 1, schema: str = "") -> list[dict[str, Any]]:
    vals = [("rf_id", "uint64", rf), ("fw_parent", "uint64", 0), ("seq_id", "int64", -1), ("scope", "uint64", 0),
            ("tid", "uint64", tid), ("fw_tid", "uint64", 0), ("op_schema", "string", schema)]
    return [{"name": n, "type": t, "value": v} for n, t, v in vals]


def _node(nid: int, name: str, parent: int, rf: int, tid: int = 1) -> dict[str, Any]:
    empty = {"values": [], "shapes": [], "types": [], "strides": []}
    return {"id": nid, "name": name, "ctrl_deps": parent, "inputs": dict(empty), "outputs": dict(empty),
            "attrs": _attrs(rf, tid)}


def _host(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema": SCHEMA, "pid": 1, "time": "t", "start_ts": 0, "finish_ts": 1,
            "nodes": [_node(1, "[pytorch|profiler|execution_trace|process]", 1, 0, 0),
                      _node(2, THREAD_ROOT, 1, 0, 1), *nodes]}


def _ev(name: str, ts: float, dur: float, rf: int, tid: int = 100, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Record function id": rf, "External id": rf}}


def _job() -> tuple[dict[str, Any], dict[str, Any]]:
    """Main thread: linear (with a callee mm) then c10d::allreduce_; gloo's all-reduce, which the host
    trace records on the main thread, ran on worker thread 200 (Kineto); after a 5 ms wait, copy_."""
    host = _host([
        _node(10, "aten::linear", 2, 10),
        _node(11, "aten::mm", 10, 11),
        _node(12, "c10d::allreduce_", 2, 12),
        _node(13, "gloo:all_reduce", 2, 13),
        _node(14, "aten::copy_", 2, 14),
    ])
    kineto = {"traceEvents": [
        _ev("aten::linear", 1000, 100, 10),
        _ev("aten::mm", 1020, 60, 11),
        _ev("c10d::allreduce_", 1200, 50, 12),
        _ev("gloo:all_reduce", 1260, 4000, 13, tid=200, cat="user_annotation"),
        _ev("aten::copy_", 6300, 30, 14),
    ]}
    return host, kineto


def test_join_by_record_function_id_sets_times_and_exclusive_durations() -> None:
    host, kineto = _job()
    out = {n["id"]: n for n in link(host, kineto)["nodes"]}
    assert out[10]["ts"] == 1000 and out[10]["inclusive_dur"] == 100
    assert out[10]["exclusive_dur"] == pytest.approx(40)  # 100 minus its callee's 60
    assert out[11]["exclusive_dur"] == pytest.approx(60)
    assert "ts" not in out[2]  # roots carry no times
    assert host["nodes"][2].get("ts") is None  # the input is not modified


def test_async_op_moves_to_the_thread_it_ran_on() -> None:
    host, kineto = _job()
    et = link(host, kineto)
    out = {n["id"]: n for n in et["nodes"]}
    gloo = out[13]
    root = out[gloo["ctrl_deps"]]
    assert root["name"] == THREAD_ROOT and root["id"] != 2
    assert node_attrs(gloo)["tid"] == node_attrs(root)["tid"] != 1
    assert node_attrs(out[12])["tid"] == 1 and out[12]["ctrl_deps"] == 2
    # the first op of the worker thread depends on the latest main-thread op that started before it,
    # and the first main-thread op after a gap > 1 ms on the latest other-thread op started before it
    assert gloo["inter_thread_dep"] == 12
    assert out[14]["inter_thread_dep"] == 13


def test_mlc_chakra_converter_accepts_the_linked_trace(tmp_path: Path) -> None:
    pytest.importorskip("chakra")
    from chakra.src.converter.pytorch_converter import PyTorchConverter

    from distscope.trace.chakra_io import read_rank

    host, kineto = _job()
    path = tmp_path / "linked.0.json"
    path.write_text(json.dumps(link(host, kineto)))
    PyTorchConverter().convert(str(path), str(tmp_path / "conv.0.et"), False)
    graph, _ = read_rank(tmp_path / "conv.0.et", 0, world=1)
    by_name = {n.name: n for n in graph.nodes}
    assert by_name["gloo:all_reduce"].lane != by_name["aten::copy_"].lane  # its own thread lane
    assert by_name["gloo:all_reduce"].duration_s == pytest.approx(4000e-6)
    assert by_name["aten::linear"].duration_s == pytest.approx(40e-6)  # exclusive: no double counting


def test_a_function_entered_before_the_window_is_dropped(tmp_path: Path) -> None:
    """Optimizer.step, entered under the previous profiled step's observer (rf 3, long before this window's
    first op) and written at its exit under this one, with that observer's node id: here 12, an id this
    trace also gives c10d::allreduce_. The observer's own record made at registration stays."""
    host, kineto = _job()
    host["nodes"][2:2] = [_node(3, "## process_group:init ##", 2, 9), _node(12, "Optimizer.step#SGD.step", 2, 3)]
    out = link(host, kineto)
    names = [n["name"] for n in out["nodes"]]
    assert "Optimizer.step#SGD.step" not in names and "## process_group:init ##" in names
    assert [n["name"] for n in out["nodes"] if n["id"] == 12] == ["c10d::allreduce_"]
    pytest.importorskip("chakra")
    from chakra.src.converter.pytorch_converter import PyTorchConverter

    path = tmp_path / "linked.0.json"
    path.write_text(json.dumps(out))
    PyTorchConverter().convert(str(path), str(tmp_path / "conv.0.et"), False)  # recursed without end before


def test_device_kernels_become_callees_of_their_launching_op() -> None:
    host = _host([_node(10, "aten::mm", 2, 10)])
    kineto = {"traceEvents": [
        _ev("aten::mm", 1000, 100, 10),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": 100, "ts": 1050, "dur": 5,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "tid": 7, "ts": 1200, "dur": 300,
         "args": {"correlation": 7, "stream": 7}},
    ]}
    kernel = link(host, kineto)["nodes"][-1]
    assert kernel["name"] == "sm90_gemm" and kernel["ctrl_deps"] == 10
    assert kernel["cat"] == "kernel" and kernel["stream"] == 7 and kernel["inclusive_dur"] == 300


def test_exclusive_durations_subtract_only_direct_callees() -> None:
    evs = [_ev("a", 0, 100, 1), _ev("b", 10, 50, 2), _ev("c", 20, 10, 3), _ev("d", 70, 10, 4)]
    excl = exclusive_durations(evs)
    assert [excl[id(e)] for e in evs] == [40, 40, 10, 10]


def test_bad_inputs_name_the_file() -> None:
    host, kineto = _job()
    with pytest.raises(DistscopeError, match=r"host trace 'h.json': schema='9.9' comes from a torch version"):
        link({**host, "schema": "9.9"}, kineto, host_where="'h.json'")
    with pytest.raises(DistscopeError, match=r"Kineto trace 'k.json': not a Kineto"):
        link(host, {"events": []}, kineto_where="'k.json'")
    with pytest.raises(DistscopeError, match="no 'nodes' list"):
        link({"schema": SCHEMA}, kineto)


def test_an_op_that_starts_during_a_wait_never_depends_on_it() -> None:
    """A 1-rank job: gloo's all-gather runs on its worker thread while the main thread is in
    Work.wait() (the wait cannot end before it): its inter-thread dependency is the op before the wait,
    not the wait or an op inside it, so the linked trace stays a DAG."""
    host = _host([
        _node(10, "c10d::_allgather_base_", 2, 10),
        _node(11, "distscope::wait pg=0 seq=4", 2, 11),
        _node(12, "aten::view", 11, 12),
        _node(13, "gloo:all_gather", 2, 13),
    ])
    kineto = {"traceEvents": [
        _ev("c10d::_allgather_base_", 1000, 50, 10),
        _ev("distscope::wait pg=0 seq=4", 1100, 3000, 11, cat="user_annotation"),
        _ev("aten::view", 1110, 5, 12),
        _ev("gloo:all_gather", 1200, 2000, 13, tid=200, cat="user_annotation"),
    ]}
    out = {n["id"]: n for n in link(host, kineto)["nodes"]}
    assert out[13]["inter_thread_dep"] == 10


def test_an_op_nested_under_an_async_span_stays_on_its_thread() -> None:
    """The host trace nests the next collective's c10d op under the previous all-reduce's gloo span
    (still "open" on the main thread that created it); the span moves to gloo's thread, the c10d op
    and its annotation stay on the main thread, under the op that was open before the span."""
    host = _host([
        _node(10, "aten::linear", 2, 10),
        _node(13, "gloo:all_reduce", 2, 13),
        _node(15, "c10d::allreduce_", 13, 15),
        _node(16, "distscope::comm pg=0 seq=1", 15, 16),
    ])
    kineto = {"traceEvents": [
        _ev("aten::linear", 1000, 100, 10),
        _ev("gloo:all_reduce", 1200, 4000, 13, tid=200, cat="user_annotation"),
        _ev("c10d::allreduce_", 1300, 50, 15),
        _ev("distscope::comm pg=0 seq=1", 1310, 20, 16, cat="user_annotation"),
    ]}
    out = {n["id"]: n for n in link(host, kineto)["nodes"]}
    assert out[15]["ctrl_deps"] == 2 and node_attrs(out[15])["tid"] == 1
    assert out[16]["ctrl_deps"] == 15
    assert node_attrs(out[13])["tid"] != 1
