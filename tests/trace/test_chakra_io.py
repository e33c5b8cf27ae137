"""Chakra ET I/O through mlc-chakra's schema and protolib."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distscope.errors import DistscopeError
from distscope.trace.chakra_io import read_rank, read_traces, write_traces
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("gen")
    subprocess.run(
        [
            "chakra_generator",
            "--num_npus",
            "4",
            "--default_comm_size",
            "65536",
            "--default_tensor_size",
            "2048",
            "--default_runtime",
            "7",
        ],
        cwd=d,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return d


def test_reads_chakra_generator_output(generated: Path) -> None:
    ar = read_traces(generated / "ALL_REDUCE")
    assert ar.num_ranks == 4
    node = ar.graphs[2].nodes[0]
    assert node.kind is NodeKind.COMM_COLL and node.comm_kind is CollKind.ALL_REDUCE
    assert node.comm_size_bytes == 65536 and node.is_cpu_op is False
    assert read_traces(generated / "ALL_TO_ALL").graphs[0].nodes[0].comm_kind is CollKind.ALL_TO_ALL
    assert read_traces(generated / "REDUCE_SCATTER").graphs[0].nodes[0].comm_kind is CollKind.REDUCE_SCATTER
    dep = read_traces(generated / "two_comp_nodes_dependent").graphs[1]
    assert [n.kind for n in dep.nodes] == [NodeKind.COMP, NodeKind.COMP]
    assert dep.nodes[1].data_deps == (dep.nodes[0].id,) and dep.nodes[0].duration_s == pytest.approx(7e-6)
    send = read_traces(generated / "one_comm_send_node").graphs[0].nodes[0]
    assert send.kind is NodeKind.COMM_SEND and send.tensor_size_bytes == 2048
    load = read_traces(generated / "one_remote_mem_load_node").graphs[3].nodes[0]
    assert load.kind is NodeKind.MEM_LOAD and load.tensor_size_bytes == 2048
    graph, _ = read_rank(generated / "one_metadata_node_all_types.0.et", 0)
    # METADATA nodes are kept (later nodes may depend on them) and carry no work
    assert graph.nodes and all(n.kind is NodeKind.METADATA and n.duration_s == 0 for n in graph.nodes)


def test_roundtrip_all_fields(tmp_path: Path) -> None:
    nodes = (
        Node(
            id=10,
            name="fwd",
            kind=NodeKind.COMP,
            duration_s=1.5e-3,
            num_ops=123456789,
            tensor_size_bytes=4096,
        ),
        Node(
            id=11,
            name="tp_ar",
            kind=NodeKind.COMM_COLL,
            comm_kind=CollKind.REDUCE_SCATTER,
            comm_size_bytes=1 << 30,
            pg_name="tp",
            data_deps=(10,),
        ),
        Node(
            id=12,
            name="send",
            kind=NodeKind.COMM_SEND,
            comm_dst=1,
            comm_tag=3,
            tensor_size_bytes=99,
            ctrl_deps=(11,),
            data_deps=(10,),
        ),
        Node(id=13, name="recv", kind=NodeKind.COMM_RECV, comm_src=1, comm_tag=4, tensor_size_bytes=99),
        Node(id=14, name="store", kind=NodeKind.MEM_STORE, tensor_size_bytes=7, is_cpu_op=True),
    )
    traces = TraceSet(
        graphs={0: RankGraph(rank=0, nodes=nodes), 1: RankGraph(rank=1, nodes=())},
        process_groups={"tp": (0, 1)},
    )
    write_traces(tmp_path / "x" / "step", traces)
    back = read_traces(tmp_path / "x" / "step")
    assert back.graphs[0].nodes == nodes
    assert back.process_groups == {"tp": (0, 1)}


def _write_raw(path: Path, comm_type: int) -> None:
    from chakra.schema.protobuf import et_def_pb2 as pb
    from chakra.src.third_party.utils.protolib import encodeMessage

    with path.open("wb") as fh:
        encodeMessage(fh, pb.GlobalMetadata(version="1.0.0"))
        node = pb.Node(id=5, name="weird", type=pb.COMM_COLL_NODE)
        node.attr.append(pb.AttributeProto(name="comm_type", int64_val=comm_type))
        encodeMessage(fh, node)


def test_unknown_comm_type_names_rank_node_field(tmp_path: Path) -> None:
    _write_raw(tmp_path / "bad.0.et", 42)
    with pytest.raises(DistscopeError, match=r"rank 0, node 5 \('weird'\): field comm_type=42"):
        read_traces(tmp_path / "bad")


def test_corrupt_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "junk.0.et").write_bytes(b"\x05abc")
    with pytest.raises(DistscopeError, match=r"junk\.0\.et"):
        read_traces(tmp_path / "junk")
    with pytest.raises(DistscopeError, match="no files named"):
        read_traces(tmp_path / "nothing")
    _write_raw(tmp_path / "gap.0.et", 0)
    _write_raw(tmp_path / "gap.2.et", 0)
    with pytest.raises(DistscopeError, match="missing rank 1"):
        read_traces(tmp_path / "gap")


def test_trace_imports_without_chakra_and_errors_in_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['chakra'] = None\n"
        "import distscope.trace, distscope.sim\n"
        "from distscope.trace.chakra_io import read_traces\n"
        "from distscope.errors import DistscopeError\n"
        "try:\n    read_traces('x')\nexcept DistscopeError as e:\n    print('ERR', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ERR Chakra ET I/O needs mlc-chakra; install it with: pip install 'distscope[chakra]'"


def test_capture_without_chakra_refuses_before_running_the_job(tmp_path: Path) -> None:
    """A capture is written as Chakra ET: without mlc-chakra, `trace capture` says so in one line before
    it spends the job's time (on a GPU host it used to run the job, then fail in post-processing)."""
    marker, job = tmp_path / "job_ran", tmp_path / "job.py"
    job.write_text(f"open({str(marker)!r}, 'w')\n")
    argv = ["trace", "capture", "--out", str(tmp_path / "cap"), "--", sys.executable, str(job)]
    code = f"import sys; sys.modules['chakra'] = None\nfrom distscope.cli import main\nmain({argv!r})\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "distscope: error: Chakra ET I/O needs mlc-chakra; install it with: pip install 'distscope[chakra]'"]
    assert not marker.exists()


def test_cli_error_is_one_line(tmp_path: Path) -> None:
    _write_raw(tmp_path / "bad.0.et", 42)
    net = tmp_path / "n.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 1 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    sysj = tmp_path / "s.json"
    sysj.write_text('{"all-reduce-implementation": ["ring"]}')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "simulate",
            str(tmp_path / "bad"),
            "--network",
            str(net),
            "--system",
            str(sysj),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "rank 0, node 5" in lines[0] and "comm_type=42" in lines[0]
