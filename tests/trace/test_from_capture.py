"""trace/from_capture.py on a hand-made linked step: leaf ops and Python time on the training thread,
COMM nodes with bytes from the op's inputs, waits (explicit and from data dependencies) as dependencies."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from distscope.errors import DistscopeError
from distscope.trace.from_capture import build_rank
from distscope.trace.graph import CollKind, NodeKind
from distscope.trace.traceset import TraceSet

AR_SCHEMA = ("c10d::allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, "
             "__torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? sparse_indices, bool async_op=True, "
             "int timeout=-1) -> (Tensor[], __torch__.torch.classes.c10d.Work)")
AG_SCHEMA = ("c10d::_allgather_base_(Tensor output_tensor, Tensor input_tensor, "
             "__torch__.torch.classes.c10d.ProcessGroup process_group, bool async_op=True, int timeout=-1) "
             "-> (Tensor, __torch__.torch.classes.c10d.Work)")


def _t(storage: int, numel: int, itemsize: int = 4) -> list[Any]:
    return [storage * 10, storage, 0, numel, itemsize, "cpu"]


def _n(nid: int, name: str, parent: int, ts: float | None, dur: float = 0.0, tid: int = 1, *,
       ins: list[Any] | None = None, types: list[str] | None = None, outs: list[Any] | None = None,
       schema: str = "") -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": nid, "name": name, "ctrl_deps": parent,
        "inputs": {"values": ins or [], "shapes": [], "types": types or [], "strides": []},
        "outputs": {"values": outs or [], "shapes": [], "types": [], "strides": []},
        "attrs": [{"name": "rf_id", "type": "uint64", "value": nid}, {"name": "tid", "type": "uint64", "value": tid},
                  {"name": "op_schema", "type": "string", "value": schema}],
    }
    if ts is not None:
        node.update(ts=ts, inclusive_dur=dur, exclusive_dur=dur)
    return node


def _step() -> dict[str, Any]:
    """Times in us. Window 0-10000 on thread 1:
    mm 100-1000 writes buffer 50; all_reduce on buffer 50 issued 1100-1300 (gloo runs it on thread 2,
    1300-4300); add_ 5000-5100 reads buffer 50 (it waited: DDP-style, no Python wait call); sum 6000-7000;
    all_gather (output 60: 2048 floats, input 61) 7000-7100; explicit wait 7200-8700; mul 8800-9000 reads 60."""
    ar_in = [[_t(50, 1024)], "<Object>", "<Object>", "<None>", True, -1]
    ag_in = [_t(60, 2048), _t(61, 1024), "<Object>", True, -1]
    return {"schema": "1.1.1-chakra.0.0.4", "nodes": [
        _n(1, "[pytorch|profiler|execution_trace|process]", 1, None, tid=0),
        _n(2, "[pytorch|profiler|execution_trace|thread]", 1, None),
        _n(4, "distscope::step", 2, 0, 10000),
        _n(5, "aten::mm", 4, 100, 900, outs=[_t(50, 1024)]),
        _n(6, "c10d::allreduce_", 4, 1100, 200, ins=ar_in, types=["GenericList[Tensor(float)]"], schema=AR_SCHEMA),
        _n(7, "distscope::comm pg=0 seq=3 dim=dp ranks=0,1 op=all_reduce", 6, 1150, 100),
        _n(8, "gloo:all_reduce", 99, 1300, 3000, tid=2),
        _n(9, "aten::add_", 4, 5000, 100, ins=[_t(50, 1024)], outs=[_t(50, 1024)]),
        _n(10, "aten::sum", 4, 6000, 1000),
        _n(11, "c10d::_allgather_base_", 4, 7000, 100, ins=ag_in, types=["Tensor(float)", "Tensor(float)"],
           schema=AG_SCHEMA),
        _n(12, "distscope::comm pg=1 seq=0 dim=tp ranks=0,1 op=all_gather", 11, 7020, 50),
        _n(13, "distscope::wait pg=1 seq=0", 4, 7200, 1500),
        _n(14, "aten::mul", 4, 8800, 200, ins=[_t(60, 2048)]),
    ]}


def test_graph_of_a_step() -> None:
    cap = build_rank(_step(), 0, "t", completion_s={("0", 3): 0.0035, ("1", 0): 0.0016})
    nodes = cap.graph.nodes
    names = [n.name for n in nodes if n.kind is NodeKind.COMP]
    assert names == ["(python)", "aten::mm", "(python)", "c10d::allreduce_", "(wait)", "aten::add_", "(python)",
                     "aten::sum", "c10d::_allgather_base_", "(python)", "(python)", "aten::mul", "(python)"]
    assert {n.lane for n in nodes if n.kind is NodeKind.COMP} == {"tid:1"}
    ar, ag = [n for n in nodes if n.kind is NodeKind.COMM_COLL]
    assert ar.comm_kind is CollKind.ALL_REDUCE and ar.comm_size_bytes == 4096 and ar.pg_name == "0"
    # all-gather: the logger counts the gathered output (8192 B); Chakra's comm_size is the per-rank shard
    assert ag.comm_kind is CollKind.ALL_GATHER and ag.comm_size_bytes == 4096 and ag.comm_dtype == "float"
    assert [(c.op.value, c.bytes, c.label) for c in cap.calls] == [("all_reduce", 4096, "dp"), ("all_gather", 8192, "tp")]
    by_name = {n.name: n for n in nodes}
    wait = by_name["(wait)"]
    assert ar.id in wait.data_deps and wait.duration_s == 0  # the gap 1300-5000 was waiting for the all-reduce
    after_wait = nodes[by_name["aten::mul"].data_deps[0]]
    assert after_wait.name == "(python)" and ag.id in after_wait.data_deps  # the explicit wait's dependency
    assert cap.implicit_waits == 1 and cap.wait_s == pytest.approx((5000 - 1300 + 1500) * 1e-6)
    total = sum(n.duration_s for n in nodes if n.kind is NodeKind.COMP)
    assert total + cap.wait_s == pytest.approx(cap.step_s) and cap.step_s == pytest.approx(0.01)
    assert cap.groups == {"0": (0, 1), "1": (0, 1)} and cap.labels == {"0": "dp", "1": "tp"}


def test_a_gap_after_the_collective_completed_is_python_time() -> None:
    cap = build_rank(_step(), 0, "t", completion_s={("0", 3): 0.0001, ("1", 0): 0.0016})
    assert cap.implicit_waits == 0
    gap = next(n for n in cap.graph.nodes if n.kind is NodeKind.COMP and n.duration_s == pytest.approx(3.7e-3))
    assert gap.name == "(python)"


def test_simulated_step_replays_compute_and_prices_communication() -> None:
    from distscope.comm.collective import Collective
    from distscope.measure.profile import OpFit, SystemProfile
    from distscope.sim.api import simulate_traces
    from distscope.sim.profile_network import ProfileNetwork

    caps = [build_rank(_step(), r, "t", completion_s={("0", 3): 0.0035, ("1", 0): 0.0016}) for r in (0, 1)]
    traces = TraceSet(graphs={r: c.graph for r, c in enumerate(caps)}, process_groups=caps[0].groups,
                      group_labels=caps[0].labels)
    fit = dict(max_rel_err=0.0, n_points=2, min_bytes=1, max_bytes=2, nranks=2, dtype="float32")
    prof = SystemProfile(name="p", levels={"default": {
        Collective.ALL_REDUCE: OpFit(alpha_s=1e-3, beta_s_per_byte=0.0, **fit),  # type: ignore[arg-type]
        Collective.ALL_GATHER: OpFit(alpha_s=2e-3, beta_s_per_byte=0.0, **fit),  # type: ignore[arg-type]
    }})
    res = simulate_traces(traces, ProfileNetwork(prof))
    compute = sum(n.duration_s for n in caps[0].graph.nodes if n.kind is NodeKind.COMP)
    # the all-reduce (1 ms) is waited for right away; the all-gather (2 ms) after 0.1 ms of Python time
    assert res.step_time_s == pytest.approx(compute + 1e-3 + (2e-3 - 100e-6))


def test_a_wait_ending_after_the_first_completion_is_completion_skew() -> None:
    """The all-reduce was done on the first rank of its group at 4000 us (comm logs, wall clock = Kineto
    clock + 100 s here); the training thread, waiting since 1300, resumed only at 5000: 1 ms of it was
    the host's, a "(completion skew)" node after the wait. The all-gather's explicit wait ended when it
    was first done: no skew. Compute scaling leaves the skew alone."""
    from distscope.sim.whatif import WhatIf, apply_to_traces
    from distscope.trace.from_capture import SKEW_NAME

    done = {("0", 3): 0.0035, ("1", 0): 0.0016}
    first = {("0", 3): (100 + 1150e-6, 100 + 4000e-6), ("1", 0): (100 + 7020e-6, 100 + 8700e-6)}
    plain = build_rank(_step(), 0, "t", completion_s=done)
    late = build_rank(_step(), 0, "t", completion_s=done, first_done=first)
    nodes = late.graph.nodes
    (skew,) = [n for n in nodes if n.name == SKEW_NAME]
    wait = nodes[skew.data_deps[0]]
    ar = next(n for n in nodes if n.kind is NodeKind.COMM_COLL and n.pg_name == "0")
    assert skew.duration_s == pytest.approx(1e-3) and skew.lane == "tid:1" and wait.name == "(wait)"
    assert ar.id in wait.data_deps
    assert plain.wait_s - late.wait_s == pytest.approx(1e-3)
    total = sum(n.duration_s for n in nodes if n.kind is NodeKind.COMP)
    assert total + late.wait_s == pytest.approx(late.step_s)
    traces = TraceSet(graphs={0: late.graph, 1: plain.graph}, process_groups=late.groups, group_labels=late.labels)
    scaled = apply_to_traces(traces, WhatIf(compute_scale=0.5)).graphs[0]
    assert next(n for n in scaled.nodes if n.name == SKEW_NAME).duration_s == pytest.approx(1e-3)
    # with the profiler's cost taken out, the lateness shrinks as the rank's CPU time did
    from distscope.trace.profiler_cost import ProfilerCost

    lean = build_rank(_step(), 0, "t", completion_s=done, first_done=first,
                      cost=ProfilerCost(inside_s=(20e-6, 0.0), outside_s=(20e-6, 0.0)))

    def busy(cap) -> float:  # type: ignore[no-untyped-def]
        return sum(n.duration_s for n in cap.graph.nodes if n.kind is NodeKind.COMP and n.name != SKEW_NAME)

    ratio = busy(lean) / busy(late)
    assert 0.9 < ratio < 1.0
    assert next(n for n in lean.graph.nodes if n.name == SKEW_NAME).duration_s == pytest.approx(1e-3 * ratio, rel=1e-6)


def test_first_completions_from_the_comm_logs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from distscope.trace.capture_files import first_completions

    def call(rank: int, seq: int, start: float, dur: float, op: str = "all_reduce", ranks=(0, 1)):  # type: ignore[no-untyped-def]
        return {"rank": rank, "op": op, "bytes": 8, "dtype": "float32", "group": "0", "group_ranks": list(ranks),
                "dim": "dp", "seq": seq, "step": 0, "start_s": start, "duration_s": dur, "api": "c10d", "error": None}

    (tmp_path / "calls").mkdir()
    logs = {0: [call(0, 0, 10.0, 0.001), call(0, 1, 11.0, 0.001, "send"), call(0, 2, 12.0, 0.001, ranks=(0, 1, 2))],
            1: [call(1, 0, 10.0, 0.004), call(1, 1, 11.0, 0.005, "recv"), call(1, 2, 12.0, 0.003, ranks=(0, 1, 2))]}
    for r, calls in logs.items():
        (tmp_path / "calls" / f"rank{r}.1.json").write_text(json.dumps({"calls": calls}))
    # seq 0: first done on rank 0 at 10.001; seq 1 is p2p without a peer (an older log: left out);
    # seq 2: rank 2 never logged it
    got = first_completions(tmp_path, {0: "a", 1: "a"})
    assert got == {0: {("0", 0): (10.0, pytest.approx(10.001))}, 1: {("0", 0): (10.0, pytest.approx(10.001))}}
    # with peers: the k-th send 0 -> 1 pairs with the k-th recv at 1 from 0. The first recv was posted
    # (11.0) before the send finished (11.001): done then, its own log says 11.005 (polled); the second
    # was posted (13.0) after its send was done (12.001): done when posted
    logs[0][1]["peer"], logs[1][1]["peer"] = 1, 0
    logs[0].append({**call(0, 3, 12.0, 0.001, "send"), "peer": 1})
    logs[1].append({**call(1, 3, 13.0, 0.002, "recv"), "peer": 0})
    for r, calls in logs.items():
        (tmp_path / "calls" / f"rank{r}.1.json").write_text(json.dumps({"calls": calls}))
    got = first_completions(tmp_path, {0: "a", 1: "a"})
    assert got[0][("0", 1)] == (11.0, pytest.approx(11.001)) and got[1][("0", 1)] == (11.0, pytest.approx(11.001))
    assert got[0][("0", 3)] == (12.0, pytest.approx(12.001)) and got[1][("0", 3)] == (13.0, pytest.approx(13.0))
    assert first_completions(tmp_path, {0: "a", 1: "b"}) == {}  # clocks of two hosts are not compared
    assert first_completions(tmp_path, {0: "a"}) == {}  # a rank of unknown host (or not gloo)


def test_simulate_starts_a_captures_ranks_at_their_measured_offsets(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Ranks of one host that began their step apart (capture.json start offsets) start that much later
    in the simulation, and the measured step runs from the first start to the last end."""
    import json

    from distscope.cli import main
    from distscope.comm.collective import Collective
    from distscope.measure.profile import OpFit, SystemProfile, save_profile
    from distscope.trace.capture_files import CaptureSummary
    from distscope.trace.chakra_io import write_rank

    caps = [build_rank(_step(), r, "t", completion_s={("0", 3): 0.0035, ("1", 0): 0.0016}) for r in (0, 1)]
    for r, c in enumerate(caps):
        write_rank(tmp_path / f"step.{r}.et", c.graph, c.groups, c.labels)
    fit = dict(max_rel_err=0.0, n_points=2, min_bytes=1, max_bytes=2, nranks=2, dtype="float32")
    save_profile(SystemProfile(name="p", levels={"default": {
        Collective.ALL_REDUCE: OpFit(alpha_s=1e-3, beta_s_per_byte=0.0, **fit),  # type: ignore[arg-type]
        Collective.ALL_GATHER: OpFit(alpha_s=2e-3, beta_s_per_byte=0.0, **fit),  # type: ignore[arg-type]
    }}), tmp_path / "profile.json")

    def simulate(offsets: dict[int, float]) -> dict:  # type: ignore[type-arg]
        summary = CaptureSummary(world_size=2, step=None, torch="", step_s_by_rank={0: 0.01, 1: 0.01},
                                 start_offset_s_by_rank=offsets, nodes=0, comm_bytes_by_group={}, converted=False)
        (tmp_path / "capture.json").write_text(json.dumps(summary.to_json()))
        main(["simulate", str(tmp_path), "--profile", str(tmp_path / "profile.json"), "--json"])
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    together, apart = simulate({}), simulate({0: 0.0, 1: 0.004})
    assert together["measured_step_s"] == pytest.approx(0.01) and apart["measured_step_s"] == pytest.approx(0.014)
    # rank 1 starts 4 ms late: everything that waits for it (both collectives, then rank 0) moves with it
    assert apart["step_time_s"] == pytest.approx(together["step_time_s"] + 0.004, rel=0.05)


@pytest.mark.parametrize(("field", "value", "says"), [
    ("start_offset_s_by_rank", "x", "an object of rank: seconds >= 0"),
    ("start_offset_s_by_rank", {"0": -1.0}, "an object of rank: seconds >= 0"),
    ("step_s_by_rank", {"a": 0.01}, "an object of rank: seconds >= 0"),
    ("step_s", None, "a step time in seconds > 0"),
    ("unprofiled_step_s", "fast", "a step time in seconds > 0 (or absent)"),
])
def test_a_corrupted_capture_summary_is_one_line(tmp_path, field, value, says) -> None:  # type: ignore[no-untyped-def]
    """capture.json's fields `simulate` reads: a bad one names itself (a string there was an AttributeError)."""
    import json

    from distscope.trace.capture_files import CaptureSummary, load_summary

    summary = CaptureSummary(world_size=2, step=None, torch="", step_s_by_rank={0: 0.01, 1: 0.01},
                             start_offset_s_by_rank={}, nodes=0, comm_bytes_by_group={}, converted=False).to_json()
    (tmp_path / "capture.json").write_text(json.dumps(summary))
    assert load_summary(tmp_path)["step_s"] == pytest.approx(0.01)
    (tmp_path / "capture.json").write_text(json.dumps({**summary, field: value}))
    with pytest.raises(DistscopeError, match=rf"capture.json'?: {field}=.* must be {re.escape(says)}; recapture") as exc:
        load_summary(tmp_path)
    assert "\n" not in str(exc.value)


def test_bad_steps_are_one_line() -> None:
    step = _step()
    no_mark = copy.deepcopy(step)
    no_mark["nodes"] = [n for n in no_mark["nodes"] if n["name"] != "distscope::step"]
    with pytest.raises(DistscopeError, match=r"f.json: 0 'distscope::step' record functions"):
        build_rank(no_mark, 0, "f.json")
    orphan = copy.deepcopy(step)
    orphan["nodes"][5]["ctrl_deps"] = 999  # the annotation's c10d op is not in the trace
    orphan["nodes"] = [n for n in orphan["nodes"] if n["id"] != 6]
    with pytest.raises(DistscopeError, match=r"node 7 .*calling c10d op is missing"):
        build_rank(orphan, 0, "f.json")
    odd = copy.deepcopy(step)
    odd["nodes"][4]["inputs"]["types"] = ["GenericList[Tensor(c10::Float4_e2m1)]"]
    with pytest.raises(DistscopeError, match=r"node 6 \('c10d::allreduce_'\): tensor dtype 'c10::Float4_e2m1'"):
        build_rank(odd, 0, "f.json")


def test_the_profilers_cost_per_op_is_taken_out_and_kept_in_total() -> None:
    """A cost of 10 us per recorded op (5 inside its interval, 5 outside, none per tensor): every
    leaf gives up 5 us, every gap the outside halves of the ops around it; what a short node cannot
    give is carried to the next node of its lane, so the whole cost comes out of the step."""
    from distscope.trace.profiler_cost import ProfilerCost

    completion = {("0", 3): 0.0035, ("1", 0): 0.0016}
    plain = build_rank(_step(), 0, "t", completion_s=completion)
    cost = ProfilerCost(inside_s=(5e-6, 0.0), outside_s=(5e-6, 0.0))
    lean = build_rank(_step(), 0, "t", completion_s=completion, cost=cost)

    def busy(cap) -> float:  # type: ignore[no-untyped-def]
        return sum(n.duration_s for n in cap.graph.nodes if n.kind is NodeKind.COMP and n.lane == "tid:1")

    # main-thread ops recorded in the window: mm, allreduce_ (+ its comm annotation inside it), add_,
    # sum, _allgather_base_ (+ annotation), mul: 6 leaves and 2 callees; the wait's cost falls in a wait
    taken = busy(plain) - busy(lean)
    assert taken == pytest.approx(6 * 10e-6 + 2 * 10e-6, abs=6e-6)
    mm = next(n for n in lean.graph.nodes if n.name == "aten::mm")
    assert mm.duration_s == pytest.approx(900e-6 - 5e-6)
    ar = next(n for n in lean.graph.nodes if n.name == "c10d::allreduce_")
    assert ar.duration_s == pytest.approx(200e-6 - 5e-6 - 10e-6)  # its own share and its annotation's
    # a huge cost: nothing goes negative; all is taken but the Python time before the first recorded op
    huge = build_rank(_step(), 0, "t", completion_s=completion, cost=ProfilerCost(inside_s=(1.0, 0.0)))
    assert all(n.duration_s >= 0 for n in huge.graph.nodes) and busy(huge) == pytest.approx(100e-6)
    assert ProfilerCost.from_json(None) == ProfilerCost()


def test_unprofiled_steps_leave_out_warmup_and_the_profiled_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from distscope.trace.capture_files import unprofiled_steps

    for r, times in ((0, [1.0, 0.5, 0.010, 0.012, 0.030, 0.011]), (1, [1.0, 0.5, 0.011, 0.010, 0.031, 0.013])):
        (tmp_path / f"steps.{r}.json").write_text(json.dumps({"rank": r, "step_s": times, "warmup": 2, "profiled": 4}))
    steps, stats = unprofiled_steps(tmp_path, 2)
    assert steps == (0.011, 0.012, 0.013)  # the slowest rank of each timed step
    assert stats[0]["steps"] == 3 and stats[1]["median_s"] == pytest.approx(0.011)
    assert unprofiled_steps(tmp_path, 3) == ((), {})  # a rank without timings: none (an older capture)
    for r in (0, 1):  # several profiled steps (a list): each is left out
        (tmp_path / f"steps.{r}.json").write_text(json.dumps(
            {"step_s": [1.0, 0.5, 0.010, 0.03, 0.03, 0.012], "warmup": 2, "profiled": [3, 4]}))
    assert unprofiled_steps(tmp_path, 2)[0] == (0.010, 0.012)
    (tmp_path / "steps.1.json").write_text(json.dumps({"step_s": "x", "warmup": 2}))
    with pytest.raises(DistscopeError, match="field step_s"):
        unprofiled_steps(tmp_path, 2)


def test_the_median_profiled_step_is_kept(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Of several profiled steps, the one whose slowest rank is the median moves up; a step a rank did not
    finish is left out."""
    import json

    from distscope.trace.capture_files import choose_profiled_step, ranks_with_traces, tries_dir

    slowest = {0: 0.30, 1: 0.20, 2: 0.25, 3: 0.01}  # step 3: rank 1 never finished it
    for k, t in slowest.items():
        d = tries_dir(tmp_path) / str(k)
        d.mkdir(parents=True)
        for r in range(2) if k != 3 else range(1):
            (d / f"meta.{r}.json").write_text(json.dumps({"world_size": 2, "step_s": t - 0.01 * r, "step": 5 + k}))
            (d / f"host.{r}.json").write_text("{}")
            (d / f"kineto.{r}.json").write_text("{}")
    choose_profiled_step(tmp_path)
    assert ranks_with_traces(tmp_path) == [0, 1] and not tries_dir(tmp_path).exists()
    assert json.loads((tmp_path / "meta.0.json").read_text())["step"] == 7
    assert json.loads((tmp_path / "profiled.json").read_text()) == {"profiled_steps_s": [0.30, 0.20, 0.25, None],
                                                                     "kept": 2}
    choose_profiled_step(tmp_path)  # once moved, nothing more to do
    assert json.loads((tmp_path / "meta.0.json").read_text())["step"] == 7


def test_an_annotation_nested_under_an_async_gloo_span_finds_its_c10d_op() -> None:
    """The host trace nests an op under whatever record function was open on its thread: here the
    all-reduce's annotation sits under the earlier all-gather's async gloo span (seen in a TP capture);
    its calling op is the c10d op on its thread whose interval holds it."""
    et = _step()
    for n in et["nodes"]:
        if n["id"] == 7:
            n["ctrl_deps"] = 8  # under gloo:all_reduce instead of c10d::allreduce_
    cap = build_rank(et, 0, "t", completion_s={("0", 3): 0.0035, ("1", 0): 0.0016})
    assert [(c.op.value, c.bytes) for c in cap.calls] == [("all_reduce", 4096), ("all_gather", 8192)]


def test_a_cast_what_if_prices_its_payload_with_that_dtypes_fit_and_a_cast_codec() -> None:
    """`simulate CAP --compress dp=fp16` on a host profile: the half-size all-reduce at float16's measured
    α-β (gloo sums halves at about half float32's bytes per second, so halving the bytes barely helps),
    plus one CPU core's cast in and out (compress/spec.CPU_CAST_GBps), not a quantizer's rates."""
    from distscope.comm.collective import Collective
    from distscope.compress.spec import CompressionMethod, CPU_CAST_GBps, cpu_codec_GBps
    from distscope.measure.calibrate import calibrate
    from distscope.measure.profile import SystemProfile
    from distscope.measure.result import CollectiveResult
    from distscope.sim.profile_network import ProfileNetwork
    from distscope.sim.whatif import WhatIf, WhatIfNetwork

    beta = {"float32": 1e-9, "float16": 2e-9}  # s per byte: float16 reduces at half the rate
    results = [CollectiveResult(op=Collective.ALL_REDUCE, bytes=b, dtype=dt, nranks=2, time_s=1e-4 + beta[dt] * b,
                                time_min_s=1e-4 + beta[dt] * b, time_max_s=1e-4 + beta[dt] * b, iters=5)
               for dt in beta for b in (1 << 20, 1 << 22, 1 << 24)]
    prof = SystemProfile.from_dict(calibrate(results, name="host").to_dict())  # and back from its JSON
    assert prof.levels["default"][Collective.ALL_REDUCE].beta_s_per_byte == pytest.approx(1e-9)  # float32's
    assert prof.by_dtype["float16"]["default"][Collective.ALL_REDUCE].beta_s_per_byte == pytest.approx(2e-9)
    caps = [build_rank(_step(), r, "t") for r in (0, 1)]
    traces = TraceSet(graphs={r: c.graph for r, c in enumerate(caps)}, process_groups=caps[0].groups,
                      group_labels=caps[0].labels)
    plain = ProfileNetwork(prof)
    size = 16 << 20  # a float32 gradient bucket
    t32 = plain.collective_s(CollKind.ALL_REDUCE, size, (0, 1), "0")
    codec = size / 1e9 / CPU_CAST_GBps[0] + size / 1e9 / CPU_CAST_GBps[1]
    fp16 = WhatIfNetwork(plain, WhatIf(compress={"dp": CompressionMethod.FP16}), traces)
    t16 = fp16.collective_s(CollKind.ALL_REDUCE, size, (0, 1), "0")
    assert t16 == pytest.approx(1e-4 + 2e-9 * size / 2 + codec)  # no faster on the wire than float32
    assert t16 > t32
    # bf16 was not swept: its half-size payload at float32's fit (the profile's only word on it)
    bf16 = WhatIfNetwork(plain, WhatIf(compress={"dp": CompressionMethod.BF16}), traces)
    assert bf16.collective_s(CollKind.ALL_REDUCE, size, (0, 1), "0") == pytest.approx(1e-4 + 1e-9 * size / 2 + codec)
    assert cpu_codec_GBps(CompressionMethod.INT8) != CPU_CAST_GBps  # a quantizer is slower than a cast
    # a group whose captured payload is already half precision is priced at float16's fit too (the
    # capture's 'c10::Half'); another group keeps float32's
    typed = plain.with_group_dtypes({"0": "c10::Half", "1": "float"})
    assert typed.collective_s(CollKind.ALL_REDUCE, size, (0, 1), "0") == pytest.approx(1e-4 + 2e-9 * size)
    assert typed.collective_s(CollKind.ALL_REDUCE, size, (0, 1), "1") == pytest.approx(t32)
    assert plain.with_group_dtypes({"0": "c10::BFloat16"}).collective_s(CollKind.ALL_REDUCE, size, (0, 1), "0") == \
        pytest.approx(t32)  # not swept: float32's
