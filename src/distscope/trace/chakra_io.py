"""Read and write Chakra execution traces (`PREFIX.<rank>.et`) with mlc-chakra's own protobuf schema.

Encoding (as `chakra_generator` writes it, see chakra/src/generator/generator.py): each file is a stream
of length-delimited messages (`protolib.encodeMessage`), a `GlobalMetadata` first, then one `Node` per
operation. Attributes are `AttributeProto`s keyed by name: `comm_type` (int64, `CollectiveCommType`),
`comm_size` (int64), `tensor_size` (uint64), `num_ops` (int64), `comm_src`/`comm_dst`/`comm_tag` (int32),
`pg_name` (string), `is_cpu_op` (bool). Durations are the Node field `duration_micros` (whole µs); distscope
also writes an int64 `duration_ns` attribute, which it prefers when reading (other readers ignore it).

distscope adds one thing Chakra leaves to a side file: process-group membership, as GlobalMetadata
attributes `pg:<name>` holding an int64 list of ranks (ASTRA-sim takes it from `--comm-group-configuration`).

mlc-chakra is an optional extra (`pip install 'distscope[chakra]'`); this module imports it lazily so that
`distscope.trace` imports without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from distscope.errors import DistscopeError
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

_MISSING = "Chakra ET I/O needs mlc-chakra; install it with: pip install 'distscope[chakra]'"
PG_ATTR_PREFIX = "pg:"


def _chakra() -> tuple[ModuleType, ModuleType]:
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError as exc:  # the optional extra is not installed
        raise DistscopeError(_MISSING) from exc
    return et_def_pb2, protolib


# Boundary maps: proto enum names <-> distscope enums (names are identical by construction).
_NODE_KINDS = {
    "COMP_NODE": NodeKind.COMP,
    "COMM_COLL_NODE": NodeKind.COMM_COLL,
    "COMM_SEND_NODE": NodeKind.COMM_SEND,
    "COMM_RECV_NODE": NodeKind.COMM_RECV,
    "MEM_LOAD_NODE": NodeKind.MEM_LOAD,
    "MEM_STORE_NODE": NodeKind.MEM_STORE,
}
_NODE_TYPE_NAMES = {kind: name for name, kind in _NODE_KINDS.items()}


def _attr_value(attr: Any) -> Any:
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    if which.endswith("_list"):
        return list(value.values)
    return value


def _node_from_proto(pb: Any, msg: Any, rank: int) -> Node | None:
    """A distscope Node, or None for METADATA nodes (which carry no work)."""
    type_name = pb.NodeType.Name(msg.type) if msg.type in pb.NodeType.values() else str(msg.type)
    where = f"rank {rank}, node {msg.id} ({msg.name!r})"
    if type_name == "METADATA_NODE":
        return None
    if type_name not in _NODE_KINDS:
        raise DistscopeError(f"{where}: field type={type_name} is not an executable node type")
    attrs = {a.name: _attr_value(a) for a in msg.attr}
    kind = _NODE_KINDS[type_name]
    comm_kind = None
    if kind is NodeKind.COMM_COLL:
        raw = attrs.get("comm_type")
        if raw is None:
            raise DistscopeError(f"{where}: COMM_COLL_NODE has no comm_type attribute")
        if isinstance(raw, str):
            name = raw
        elif int(raw) in pb.CollectiveCommType.values():
            name = pb.CollectiveCommType.Name(int(raw))
        else:
            name = str(raw)
        if name not in CollKind.__members__:
            raise DistscopeError(f"{where}: field comm_type={raw} is not a known collective{_closest(name)}")
        comm_kind = CollKind[name]
    src = attrs.get("comm_src")
    dst = attrs.get("comm_dst")
    return Node(
        id=int(msg.id),
        name=msg.name,
        kind=kind,
        data_deps=tuple(int(d) for d in msg.data_deps),
        ctrl_deps=tuple(int(d) for d in msg.ctrl_deps),
        duration_s=(
            float(attrs["duration_ns"]) * 1e-9 if attrs.get("duration_ns") else float(msg.duration_micros) * 1e-6
        ),
        num_ops=int(attrs.get("num_ops") or 0),
        tensor_size_bytes=int(attrs.get("tensor_size") or 0),
        comm_kind=comm_kind,
        comm_size_bytes=int(attrs.get("comm_size") or 0),
        comm_src=None if src is None else int(src),
        comm_dst=None if dst is None else int(dst),
        comm_tag=int(attrs.get("comm_tag") or 0),
        pg_name=str(attrs.get("pg_name") or ""),
        is_cpu_op=bool(attrs.get("is_cpu_op") or False),
    )


def _closest(name: str) -> str:
    from distscope.errors import closest

    return closest(name, CollKind.__members__)


def read_rank(path: str | Path, rank: int) -> tuple[RankGraph, dict[str, tuple[int, ...]]]:
    """Parse one `.et` file: the rank's graph and the process groups its metadata declares."""
    pb, protolib = _chakra()
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise DistscopeError(f"trace file {str(path)!r}: cannot open ({exc.strerror})") from exc
    groups: dict[str, tuple[int, ...]] = {}
    meta: dict[str, object] = {}
    nodes: list[Node] = []
    with fh:
        gm = pb.GlobalMetadata()
        try:
            if not protolib.decodeMessage(fh, gm):
                raise DistscopeError(f"trace file {str(path)!r}: empty, no GlobalMetadata")
            meta["version"] = gm.version
            for attr in gm.attr:
                if attr.name.startswith(PG_ATTR_PREFIX):
                    groups[attr.name[len(PG_ATTR_PREFIX) :]] = tuple(int(r) for r in _attr_value(attr))
                else:
                    meta[attr.name] = _attr_value(attr)
            while True:
                msg = pb.Node()
                if not protolib.decodeMessage(fh, msg):
                    break
                node = _node_from_proto(pb, msg, rank)
                if node is not None:
                    nodes.append(node)
        except DistscopeError:
            raise
        except Exception as exc:  # protobuf DecodeError on a truncated/corrupt file
            raise DistscopeError(f"trace file {str(path)!r}: not a Chakra ET ({exc})") from exc
    return RankGraph(rank=rank, nodes=tuple(nodes), metadata=meta), groups


def _node_to_proto(pb: Any, node: Node) -> Any:
    msg = pb.Node(id=node.id, name=node.name, type=getattr(pb, _NODE_TYPE_NAMES[node.kind]))
    msg.data_deps.extend(node.data_deps)
    msg.ctrl_deps.extend(node.ctrl_deps)
    msg.duration_micros = round(node.duration_s * 1e6)
    attr = pb.AttributeProto
    msg.attr.append(attr(name="is_cpu_op", bool_val=node.is_cpu_op))
    if node.duration_s:  # duration_micros is whole microseconds; keep ns for short kernels
        msg.attr.append(attr(name="duration_ns", int64_val=round(node.duration_s * 1e9)))
    if node.num_ops:
        msg.attr.append(attr(name="num_ops", int64_val=node.num_ops))
    if node.tensor_size_bytes:
        msg.attr.append(attr(name="tensor_size", uint64_val=node.tensor_size_bytes))
    if node.comm_kind is not None:
        msg.attr.append(attr(name="comm_type", int64_val=getattr(pb, node.comm_kind.value)))
        msg.attr.append(attr(name="comm_size", int64_val=node.comm_size_bytes))
    if node.comm_src is not None:
        msg.attr.append(attr(name="comm_src", int32_val=node.comm_src))
    if node.comm_dst is not None:
        msg.attr.append(attr(name="comm_dst", int32_val=node.comm_dst))
    if node.kind in (NodeKind.COMM_SEND, NodeKind.COMM_RECV):
        msg.attr.append(attr(name="comm_tag", int32_val=node.comm_tag))
    if node.pg_name:
        msg.attr.append(attr(name="pg_name", string_val=node.pg_name))
    return msg


def write_rank(path: str | Path, graph: RankGraph, process_groups: Mapping[str, Iterable[int]] | None = None) -> None:
    """Write one rank's graph as a Chakra ET file (GlobalMetadata, then the nodes in order)."""
    pb, protolib = _chakra()
    gm = pb.GlobalMetadata(version="1.0.0")
    for name, ranks in sorted((process_groups or {}).items()):
        gm.attr.append(pb.AttributeProto(name=PG_ATTR_PREFIX + name, int64_list=pb.Int64List(values=list(ranks))))
    with Path(path).open("wb") as fh:
        protolib.encodeMessage(fh, gm)
        for node in graph.nodes:
            protolib.encodeMessage(fh, _node_to_proto(pb, node))


_RANK_FILE = re.compile(r"^(?P<stem>.+)\.(?P<rank>\d+)\.et$")


def trace_files(prefix: str | Path) -> dict[int, Path]:
    """`PREFIX.<rank>.et` files by rank; ranks must be 0..N-1 without gaps."""
    prefix = Path(prefix)
    parent = prefix.parent if str(prefix.parent) else Path(".")
    found: dict[int, Path] = {}
    if parent.is_dir():
        for p in parent.iterdir():
            m = _RANK_FILE.match(p.name)
            if m and m.group("stem") == prefix.name:
                found[int(m.group("rank"))] = p
    if not found:
        raise DistscopeError(f"trace prefix {str(prefix)!r}: no files named {prefix.name}.<rank>.et")
    missing = sorted(set(range(len(found))) - set(found))
    if missing:
        raise DistscopeError(
            f"trace prefix {str(prefix)!r}: ranks must be 0..{max(found)} without gaps; missing rank {missing[0]}"
        )
    return dict(sorted(found.items()))


def prefixes_in(directory: str | Path) -> list[str]:
    """The distinct trace prefixes (file stems before `.<rank>.et`) in a directory."""
    stems = {m.group("stem") for p in Path(directory).iterdir() if (m := _RANK_FILE.match(p.name))}
    return sorted(stems)


def read_traces(prefix: str | Path, on_rank: Callable[[], None] | None = None) -> TraceSet:
    """Read all ranks of `PREFIX.<rank>.et` into a TraceSet (`on_rank` is called per file: progress)."""
    _chakra()
    graphs = {}
    groups: dict[str, tuple[int, ...]] = {}
    for rank, path in trace_files(prefix).items():
        graph, declared = read_rank(path, rank)
        if on_rank is not None:
            on_rank()
        graphs[rank] = graph
        for name, ranks in declared.items():
            if name in groups and groups[name] != ranks:
                raise DistscopeError(
                    f"rank {rank}: field pg:{name} lists ranks {list(ranks)} but another rank lists "
                    f"{list(groups[name])}"
                )
            groups[name] = ranks
    return TraceSet(graphs=graphs, process_groups=groups)


def write_traces(prefix: str | Path, traces: TraceSet, on_rank: Callable[[], None] | None = None) -> list[Path]:
    """Write every rank of a TraceSet as `PREFIX.<rank>.et`; returns the paths written."""
    _chakra()
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, graph in traces.graphs.items():
        path = prefix.parent / f"{prefix.name}.{rank}.et"
        used = {n.pg_name for n in graph.nodes if n.pg_name}
        write_rank(path, graph, {k: v for k, v in traces.process_groups.items() if k in used})
        paths.append(path)
        if on_rank is not None:
            on_rank()
    return paths


MANIFEST = "manifest.json"
MANIFEST_FORMAT = "distscope-symmetric/1"


def write_symmetric(directory: str | Path, traces: TraceSet, prefix: str = "step",
                    on_rank: Callable[[], None] | None = None) -> Path:
    """Write a symmetric trace set: `PREFIX.<rep>.et` for each representative rank plus `manifest.json`
    ({"format", "prefix", "num_ranks", "class_of": representative rank of every rank}); `on_rank` per file."""
    import json

    if traces.class_of is None:
        raise DistscopeError("write_symmetric needs a symmetric trace set (class_of)")
    directory = Path(directory)
    write_traces(directory / prefix, traces, on_rank)
    manifest = {
        "format": MANIFEST_FORMAT,
        "prefix": prefix,
        "num_ranks": traces.num_ranks,
        "representatives": sorted(traces.graphs),
        "class_of": list(traces.class_of),
    }
    path = directory / MANIFEST
    path.write_text(json.dumps(manifest))
    return path


def read_symmetric(directory: str | Path, on_rank: Callable[[], None] | None = None) -> TraceSet:
    """Read a directory written by `write_symmetric` (`on_rank` is called per file: progress)."""
    import json

    _chakra()
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DistscopeError(f"manifest {str(path)!r}: cannot read ({exc})") from exc
    if manifest.get("format") != MANIFEST_FORMAT:
        raise DistscopeError(f"manifest {str(path)!r}: field format={manifest.get('format')!r}, need {MANIFEST_FORMAT}")
    class_of = tuple(int(r) for r in manifest["class_of"])
    if len(class_of) != int(manifest["num_ranks"]):
        raise DistscopeError(
            f"manifest {str(path)!r}: class_of has {len(class_of)} entries, num_ranks={manifest['num_ranks']}"
        )
    graphs = {}
    groups: dict[str, tuple[int, ...]] = {}
    for rep in sorted(set(class_of)):
        graph, declared = read_rank(Path(directory) / f"{manifest['prefix']}.{rep}.et", rep)
        graphs[rep] = graph
        if on_rank is not None:
            on_rank()
        groups.update(declared)
    return TraceSet(graphs=graphs, process_groups=groups, class_of=class_of)
