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

import ast
import contextlib
import functools
import gc
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from distscope.errors import DistscopeError, warn
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

_MISSING = "Chakra ET I/O needs mlc-chakra; install it with: pip install 'distscope[chakra]'"
PG_ATTR_PREFIX = "pg:"


def chakra() -> tuple[ModuleType, ModuleType]:
    """mlc-chakra's ET protobuf and its I/O helpers, or the one-line error naming the extra to install."""
    try:
        from chakra.schema.protobuf import et_def_pb2
        from chakra.src.third_party.utils import protolib
    except ImportError as exc:  # the optional extra is not installed
        raise DistscopeError(_MISSING) from exc
    return et_def_pb2, protolib


# Boundary maps: proto enum names <-> distscope enums (names are identical by construction).
_NODE_KINDS = {
    "METADATA_NODE": NodeKind.METADATA,
    "COMP_NODE": NodeKind.COMP,
    "COMM_COLL_NODE": NodeKind.COMM_COLL,
    "COMM_SEND_NODE": NodeKind.COMM_SEND,
    "COMM_RECV_NODE": NodeKind.COMM_RECV,
    "MEM_LOAD_NODE": NodeKind.MEM_LOAD,
    "MEM_STORE_NODE": NodeKind.MEM_STORE,
}
_NODE_TYPE_NAMES = {kind: name for name, kind in _NODE_KINDS.items()}

# PyTorch execution-trace schemas mlc-chakra's converter reads (chakra/src/converter/pytorch_node.py,
# PyTorchNode.SUPPORTED_VERSIONS, mlc-chakra 1.0.0); its output carries the schema as a GlobalMetadata attr.
PYTORCH_ET_SCHEMAS = ("1.0.2-chakra.0.0.4", "1.0.3-chakra.0.0.4", "1.1.0-chakra.0.0.4", "1.1.1-chakra.0.0.4",
                      "1.1.1-chakra.1.0.0")
# Chakra ET (et_def.proto) versions: chakra_generator writes 0.0.4, distscope 1.0.0.
CHAKRA_VERSIONS = ("0.0.4", "1.0.0")
LANE_TID, LANE_STREAM = "tid:", "stream:"
PG_LABEL_PREFIX = "pg_label:"
PG_INIT_NAME = "process_group:init"


def _attr_value(attr: Any) -> Any:
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    if which.endswith("_list"):
        return list(value.values)
    return value


def _lane(attrs: dict[str, Any], is_cpu_op: bool) -> str:
    """The execution resource of a node: a device stream for device ops, else the host thread."""
    if not is_cpu_op and attrs.get("stream") is not None:
        return f"{LANE_STREAM}{int(attrs['stream'])}"
    if attrs.get("tid") is not None:
        return f"{LANE_TID}{int(attrs['tid'])}"
    return ""


@functools.cache
def _enum_names(enum: Any) -> dict[int, str]:
    """value -> name of a protobuf enum (looked up once per enum, not per node: a trace set holds millions)."""
    return {int(v): enum.Name(v) for v in enum.values()}


@functools.cache
def _node_kinds(enum: Any) -> dict[int, NodeKind]:
    """NodeType value -> the NodeKind distscope executes (the types it does not execute are absent)."""
    return {v: _NODE_KINDS[name] for v, name in _enum_names(enum).items() if name in _NODE_KINDS}


_LANED = frozenset((NodeKind.COMP, NodeKind.MEM_LOAD, NodeKind.MEM_STORE))


def _node_from_proto(pb: Any, msg: Any, rank: int) -> Node:
    kind = _node_kinds(pb.NodeType).get(msg.type)
    if kind is None:
        type_name = _enum_names(pb.NodeType).get(msg.type) or str(msg.type)
        raise DistscopeError(f"{_where(msg, rank)}: field type={type_name} is not a node type distscope executes")
    attrs = {a.name: _attr_value(a) for a in msg.attr}
    get = attrs.get
    comm_kind = None
    if kind is NodeKind.COMM_COLL:
        raw = get("comm_type")
        if raw is None:
            raise DistscopeError(f"{_where(msg, rank)}: COMM_COLL_NODE has no comm_type attribute")
        name = raw if isinstance(raw, str) else _enum_names(pb.CollectiveCommType).get(int(raw)) or str(raw)
        if name not in CollKind.__members__:
            raise DistscopeError(f"{_where(msg, rank)}: field comm_type={raw} is not a known collective{_closest(name)}")
        comm_kind = CollKind[name]
    src = get("comm_src")
    dst = get("comm_dst")
    # Chakra's is_cpu_op defaults to true when absent (et_def.proto); device kernels say false.
    cpu = get("is_cpu_op")
    is_cpu_op = bool(cpu) if cpu is not None else not kind.is_comm
    ns = get("duration_ns")
    return Node(
        id=int(msg.id),
        name=msg.name,
        kind=kind,
        data_deps=tuple(msg.data_deps),
        ctrl_deps=tuple(msg.ctrl_deps),
        duration_s=(
            0.0 if kind is NodeKind.METADATA else float(ns) * 1e-9 if ns else float(msg.duration_micros) * 1e-6
        ),
        num_ops=int(get("num_ops") or 0),
        tensor_size_bytes=int(get("tensor_size") or 0),
        comm_kind=comm_kind,
        comm_size_bytes=int(get("comm_size") or 0),
        comm_src=None if src is None else int(src),
        comm_dst=None if dst is None else int(dst),
        comm_tag=int(get("comm_tag") or 0),
        pg_name=str(get("pg_name") or ""),
        comm_dtype=str(get("comm_dtype") or ""),
        is_cpu_op=is_cpu_op,
        lane=_lane(attrs, is_cpu_op) if kind in _LANED else "",
    )


def _where(msg: Any, rank: int) -> str:
    return f"rank {rank}, node {msg.id} ({msg.name!r})"


def _closest(name: str) -> str:
    from distscope.errors import closest

    return closest(name, CollKind.__members__)


def _pg_init_groups(msg: Any, world: int | None) -> dict[str, tuple[int, ...]]:
    """Process groups from PyTorch's `## process_group:init ##` METADATA node: its first input is a JSON
    list of {"pg_name", "ranks", "group_size", ...}; empty ranks mean every rank (the default group), as
    ASTRA-sim's Workload::issue_pytorch_pg_metadata reads it. The converter stores the inputs as the
    Python repr of the value list, e.g. `['[{"pg_name": "0", "ranks": [], ...}]']`."""
    raw = msg.inputs.values
    try:
        values = ast.literal_eval(raw) if raw else []
        text = values[0] if isinstance(values, list) and values else raw
        pgs = json.loads(text)
    except (ValueError, SyntaxError, TypeError, json.JSONDecodeError):
        return {}
    out = {}
    for pg in pgs if isinstance(pgs, list) else []:
        if not isinstance(pg, dict) or "pg_name" not in pg:
            continue
        ranks = [int(r) for r in pg.get("ranks") or []]
        if not ranks:
            size = int(pg.get("group_size") or world or 0)
            ranks = list(range(size))
        if ranks:
            out[str(pg["pg_name"])] = tuple(ranks)
    return out


def _check_version(path: Path, gm: Any, meta: dict[str, object]) -> None:
    where = f"trace file {str(path)!r}, GlobalMetadata"
    version = str(gm.version or "")
    if version and version not in CHAKRA_VERSIONS:
        raise DistscopeError(
            f"{where}: version={version!r} is a Chakra ET version distscope does not read "
            f"(reads {', '.join(CHAKRA_VERSIONS)}); convert it with mlc-chakra {', '.join(CHAKRA_VERSIONS)}"
        )
    schema = meta.get("schema")
    if schema is not None and str(schema) not in PYTORCH_ET_SCHEMAS:
        raise DistscopeError(
            f"{where}: schema={schema!r} comes from a PyTorch/Chakra version distscope does not read "
            f"(reads {', '.join(PYTORCH_ET_SCHEMAS)})"
        )


def _leaf_times(nodes: list[Node]) -> list[Node]:
    """Nesting is never counted twice. In PyTorch-derived traces ctrl_deps name the calling op
    (chakra's converter: `ctrl_deps = parent`). mlc-chakra's converter writes each op's exclusive time
    (`duration_micros = exclusive_dur`, pytorch_converter.py), which sums without double counting; a
    trace that records inclusive times instead (a caller's time covers its callees', i.e. it is at least
    their sum) gets only its leaves timed: such callers are kept, for their dependencies, at zero time."""
    callees: dict[int, float] = {}
    for n in nodes:
        for d in n.ctrl_deps:
            callees[d] = callees.get(d, 0.0) + n.duration_s
    if not callees:
        return nodes
    import dataclasses

    return [
        dataclasses.replace(n, duration_s=0.0)
        if n.id in callees and n.kind is NodeKind.COMP and n.duration_s > 0 and n.duration_s >= callees[n.id]
        else n
        for n in nodes
    ]


def _drop_dangling(nodes: list[Node]) -> tuple[list[Node], int, tuple[int, int] | None]:
    """Remove dependencies on ids absent from the file; returns (nodes, count, (node, missing) example)."""
    import dataclasses

    ids = {n.id for n in nodes}
    count = 0
    example: tuple[int, int] | None = None
    out = []
    for n in nodes:
        if all(d in ids for d in n.data_deps) and all(d in ids for d in n.ctrl_deps):
            out.append(n)
            continue
        data = tuple(d for d in n.data_deps if d in ids)
        ctrl = tuple(d for d in n.ctrl_deps if d in ids)
        lost = len(n.data_deps) + len(n.ctrl_deps) - len(data) - len(ctrl)
        count += lost
        if example is None:
            example = (n.id, next(d for d in (*n.data_deps, *n.ctrl_deps) if d not in ids))
        out.append(dataclasses.replace(n, data_deps=data, ctrl_deps=ctrl))
    return out, count, example


def _decode_strict(fh: Any, msg: Any) -> bool:
    """Chakra's protolib.decodeMessage (a varint length, then the message), except that a file ending inside
    a message is an error: protobuf would parse the cut bytes as a shorter, valid-looking node."""
    size = shift = 0
    while True:
        b = fh.read(1)
        if not b:
            if shift == 0:
                return False
            raise ValueError("the file ends inside a message length")
        size |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("malformed message length")
    buf = fh.read(size)
    if len(buf) < size:
        raise ValueError(f"the file ends inside a message ({len(buf)} of {size} bytes)")
    msg.ParseFromString(buf)
    return True


def read_rank(
    path: str | Path, rank: int, world: int | None = None
) -> tuple[RankGraph, dict[str, tuple[int, ...]]]:
    """Parse one `.et` file: the rank's graph and the process groups its metadata declares.

    Real converter output is read as it comes: METADATA nodes are kept (zero time), dependencies on
    nodes absent from the file are dropped and counted in one warning, nested PyTorch ops take time
    only at the leaves (`_leaf_times`), and each COMP node runs on the lane of its thread or stream.
    """
    pb, _ = chakra()
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise DistscopeError(f"trace file {str(path)!r}: cannot open ({exc.strerror})") from exc
    groups: dict[str, tuple[int, ...]] = {}
    labels: dict[str, str] = {}
    meta: dict[str, object] = {}
    nodes: list[Node] = []
    last = "GlobalMetadata"
    with fh:
        gm = pb.GlobalMetadata()
        try:
            if not _decode_strict(fh, gm):
                raise DistscopeError(f"trace file {str(path)!r}: empty, no GlobalMetadata")
            meta["version"] = gm.version
            for attr in gm.attr:
                if attr.name.startswith(PG_ATTR_PREFIX):
                    groups[attr.name[len(PG_ATTR_PREFIX) :]] = tuple(int(r) for r in _attr_value(attr))
                elif attr.name.startswith(PG_LABEL_PREFIX):
                    labels[attr.name[len(PG_LABEL_PREFIX) :]] = str(_attr_value(attr))
                else:
                    meta[attr.name] = _attr_value(attr)
            _check_version(path, gm, meta)
            while True:
                msg = pb.Node()
                if not _decode_strict(fh, msg):
                    break
                node = _node_from_proto(pb, msg, rank)
                if node.kind is NodeKind.METADATA and PG_INIT_NAME in node.name:
                    for name, ranks in _pg_init_groups(msg, world).items():
                        groups.setdefault(name, ranks)
                nodes.append(node)
                last = f"node {msg.id} ({msg.name!r})"
        except DistscopeError as exc:
            if str(path) in str(exc):
                raise
            raise DistscopeError(f"trace file {str(path)!r}, {exc}") from exc
        except Exception as exc:  # protobuf DecodeError on a truncated/corrupt file
            raise DistscopeError(
                f"trace file {str(path)!r}: truncated or corrupt after {last}: not a Chakra ET ({exc})"
            ) from exc
    nodes, dangling, example = _drop_dangling(nodes)
    if dangling:
        assert example is not None
        warn(
            f"trace file {str(path)!r}: {dangling} dependencies name nodes absent from the file (e.g. node "
            f"{example[0]} -> {example[1]}); treated as satisfied"
        )
    if "schema" in meta:  # PyTorch-derived (chakra_converter output): ctrl_deps name the calling op
        nodes = _leaf_times(nodes)
    if labels:
        meta["pg_labels"] = labels
    try:
        graph = RankGraph(rank=rank, nodes=tuple(nodes), metadata=meta)
    except DistscopeError as exc:
        raise DistscopeError(f"trace file {str(path)!r}, {exc}") from exc
    return graph, groups


def _node_to_proto(pb: Any, node: Node) -> Any:
    msg = pb.Node(id=node.id, name=node.name, type=getattr(pb, _NODE_TYPE_NAMES[node.kind]))
    msg.data_deps.extend(node.data_deps)
    msg.ctrl_deps.extend(node.ctrl_deps)
    msg.duration_micros = round(node.duration_s * 1e6)
    attr = pb.AttributeProto
    msg.attr.append(attr(name="is_cpu_op", bool_val=node.is_cpu_op))
    if node.lane.startswith(LANE_TID):
        msg.attr.append(attr(name="tid", int64_val=int(node.lane[len(LANE_TID) :])))
    elif node.lane.startswith(LANE_STREAM):
        msg.attr.append(attr(name="stream", int64_val=int(node.lane[len(LANE_STREAM) :])))
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
    if node.comm_dtype:
        msg.attr.append(attr(name="comm_dtype", string_val=node.comm_dtype))
    return msg


def write_rank(
    path: str | Path,
    graph: RankGraph,
    process_groups: Mapping[str, Iterable[int]] | None = None,
    group_labels: Mapping[str, str] | None = None,
) -> None:
    """Write one rank's graph as a Chakra ET file (GlobalMetadata, then the nodes in order)."""
    pb, protolib = chakra()
    gm = pb.GlobalMetadata(version="1.0.0")
    for name, ranks in sorted((process_groups or {}).items()):
        gm.attr.append(pb.AttributeProto(name=PG_ATTR_PREFIX + name, int64_list=pb.Int64List(values=list(ranks))))
    for name, label in sorted((group_labels or {}).items()):
        gm.attr.append(pb.AttributeProto(name=PG_LABEL_PREFIX + name, string_val=label))
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


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a trace set is built: its millions of Nodes hold no cycles,
    but each allocation burst makes the collector scan everything allocated so far (the README's 128-rank
    GPT-3 set reads 18% faster without it). Restored on the way out, errors included."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_traces(prefix: str | Path, on_rank: Callable[[], None] | None = None) -> TraceSet:
    """Read all ranks of `PREFIX.<rank>.et` into a TraceSet (`on_rank` is called per file: progress)."""
    chakra()
    with _gc_paused():
        return _read_traces(prefix, on_rank)


def _read_traces(prefix: str | Path, on_rank: Callable[[], None] | None) -> TraceSet:
    graphs = {}
    groups: dict[str, tuple[int, ...]] = {}
    labels: dict[str, str] = {}
    files = trace_files(prefix)
    for rank, path in files.items():
        graph, declared = read_rank(path, rank, world=len(files))
        if on_rank is not None:
            on_rank()
        graphs[rank] = graph
        for name, ranks in declared.items():
            if name in groups and groups[name] != ranks:
                raise DistscopeError(
                    f"trace file {str(path)!r}: field pg:{name} lists ranks {list(ranks)} but another rank "
                    f"lists {list(groups[name])}"
                )
            groups[name] = ranks
        labels.update(graph.metadata.get("pg_labels", {}))  # type: ignore[call-overload]
    beyond = sorted({r for ranks in groups.values() for r in ranks if r >= len(files)})
    if beyond:
        name = next(n for n, ranks in groups.items() if beyond[0] in ranks)
        stem = Path(prefix).name
        raise DistscopeError(
            f"trace prefix {str(prefix)!r}: missing rank {beyond[0]}: process group {name!r} lists it but there "
            f"is no {stem}.{beyond[0]}.et (files for ranks 0..{len(files) - 1})"
        )
    return TraceSet(graphs=graphs, process_groups=groups, group_labels=labels)


def write_traces(prefix: str | Path, traces: TraceSet, on_rank: Callable[[], None] | None = None) -> list[Path]:
    """Write every rank of a TraceSet as `PREFIX.<rank>.et`; returns the paths written."""
    chakra()
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, graph in traces.graphs.items():
        path = prefix.parent / f"{prefix.name}.{rank}.et"
        used = {n.pg_name for n in graph.nodes if n.pg_name}
        write_rank(
            path,
            graph,
            {k: v for k, v in traces.process_groups.items() if k in used},
            {k: v for k, v in traces.group_labels.items() if k in used},
        )
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

    chakra()
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
        graph, declared = read_rank(Path(directory) / f"{manifest['prefix']}.{rep}.et", rep, world=len(class_of))
        graphs[rep] = graph
        if on_rank is not None:
            on_rank()
        groups.update(declared)
    return TraceSet(graphs=graphs, process_groups=groups, class_of=class_of)
