"""What-if questions on a trace set (Daydream, Zhu et al. 2020: edit the traced graph, re-simulate).

Each option changes one thing and leaves the rest of the captured step as it ran:
* compute scale F (on every rank, or on some): every COMP/MEM node takes F times its time, except a
  captured trace's "(completion skew)" (host time, trace/from_capture.py);
* delay: one rank starts its step that much later (a straggler), all its first nodes wait for it;
* a level's bandwidth / latency scaled (applied where the network is built: profile or cluster);
* a collective's algorithm forced (ring, tree, rhd, ... from comm/; measured profiles re-price
  relative to the ring, see sim/profile_network.py);
* compress a group's collectives with a `compress` method: the collective moves bytes·r
  (r = compress.spec.ratio_vs(method, dtype of the payload)) priced by the same network model (a cast's
  bf16/fp16 payload with that dtype's measured α-β where the profile swept it), plus the method's
  quantize + dequantize time (compress.spec.compressed_comm_cost; on a host's profile one CPU core's
  rates, a cast's or a quantizer's), serially on the group's stream;
* remove a group's communication (its transfers take no time: an upper bound on what overlap or
  compression could win);
* move the job to a cluster preset: trace rank i runs on cluster GPU placement[i] (default i).
A group is named by its process-group name, its parallelism label (dp, tp, pp, ... as the capture
recorded it) or `all`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol

from distscope.comm import Algorithm
from distscope.compress.spec import (
    BF16_BYTES,
    CompressionMethod,
    compressed_comm_cost,
    parse_method,
    ratio_vs,
)
from distscope.errors import DistscopeError, closest
from distscope.trace.from_capture import SKEW_NAME
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

ALL = "all"
DELAY_NAME = "(what-if delay)"
# Payload element sizes by torch dtype name (the capture's comm_dtype); unknown -> bf16, compress/spec's
# reference width.
DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "half": 2, "float16": 2,
               "c10::BFloat16": 2, "bfloat16": 2, "long": 8, "long int": 8, "int": 4, "int32": 4, "int8": 1,
               "signed char": 1, "unsigned char": 1, "uint8": 1, "c10::Float8_e4m3fn": 1}


@dataclasses.dataclass(frozen=True, kw_only=True)
class WhatIf:
    compute_scale: float = 1.0
    compute_ranks: frozenset[int] | None = None  # None: every rank
    delay_s: Mapping[int, float] = dataclasses.field(default_factory=dict)
    algorithms: Mapping[CollKind, Algorithm] = dataclasses.field(default_factory=dict)
    compress: Mapping[str, CompressionMethod] = dataclasses.field(default_factory=dict)
    no_comm: frozenset[str] = frozenset()
    placement: tuple[int, ...] | None = None
    codec_GBps: tuple[float, float] | None = None  # (quantize, dequantize); None: one CPU core's, by method

    def __post_init__(self) -> None:
        if not self.compute_scale > 0:
            raise DistscopeError(f"--scale-compute={self.compute_scale} must be > 0")
        bad = {r: d for r, d in self.delay_s.items() if d < 0 or r < 0}
        if bad:
            raise DistscopeError(f"--delay-ms: {bad} must name ranks >= 0 and delays >= 0")
        if self.placement is not None and len(set(self.placement)) != len(self.placement):
            raise DistscopeError(f"--place={list(self.placement)} maps two ranks onto one GPU")

    @property
    def changes_traces(self) -> bool:
        return self.compute_scale != 1.0 or bool(self.delay_s)

    @property
    def changes_network(self) -> bool:
        return bool(self.algorithms or self.compress or self.no_comm or self.placement)


# -- parsing (strings -> enums once, here) ---------------------------------------------------------------
def _pairs(text: str, flag: str) -> list[tuple[str, str]]:
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise DistscopeError(f"{flag}={text!r}: expected KEY=VALUE[,KEY=VALUE], got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


def _float(value: str, flag: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise DistscopeError(f"{flag}: {value!r} is not a number") from None


def parse_scale_compute(text: str) -> tuple[float, frozenset[int] | None]:
    """'0.5' (every rank) or '2@1,3' (ranks 1 and 3)."""
    factor, _, ranks = text.partition("@")
    f = _float(factor, "--scale-compute")
    if not ranks:
        return f, None
    try:
        return f, frozenset(int(r) for r in ranks.split(",") if r.strip())
    except ValueError:
        raise DistscopeError(f"--scale-compute={text!r}: ranks after '@' must be integers") from None


def parse_delays(text: str) -> dict[int, float]:
    """'1=40,3=5' -> {1: 0.040, 3: 0.005} (milliseconds in, seconds out)."""
    out = {}
    for k, v in _pairs(text, "--delay-ms"):
        if not k.isdigit():
            raise DistscopeError(f"--delay-ms: {k!r} is not a rank")
        out[int(k)] = _float(v, "--delay-ms") * 1e-3
    return out


def parse_level_scales(text: str, flag: str) -> dict[str, float]:
    out = {k: _float(v, flag) for k, v in _pairs(text, flag)}
    bad = [k for k, v in out.items() if not v > 0]
    if bad:
        raise DistscopeError(f"{flag}: factor for {bad[0]!r} must be > 0")
    return out


def parse_algorithms(text: str) -> dict[CollKind, Algorithm]:
    out = {}
    kinds = {k.value.lower(): k for k in CollKind}
    algos = [a.value for a in Algorithm]
    for k, v in _pairs(text, "--algorithm"):
        kind = kinds.get(k.lower().replace("-", "_"))
        if kind is None:
            raise DistscopeError(f"--algorithm: {k!r} is not a collective{closest(k.lower(), kinds)}")
        try:
            out[kind] = Algorithm(v.lower())
        except ValueError:
            raise DistscopeError(f"--algorithm: {v!r} is not an algorithm{closest(v.lower(), algos)}") from None
    return out


def parse_compress(text: str) -> dict[str, CompressionMethod]:
    return {k: parse_method(v, key=f"--compress {k}") for k, v in _pairs(text, "--compress")}


def parse_groups(text: str) -> frozenset[str]:
    return frozenset(filter(None, (s.strip() for s in text.split(","))))


def parse_placement(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(r) for r in text.split(",") if r.strip())
    except ValueError:
        raise DistscopeError(f"--place={text!r}: expected GPU indices, e.g. 0,8,16,24") from None


# -- applying ----------------------------------------------------------------------------------------------
def check_groups(whatif: WhatIf, traces: TraceSet) -> None:
    """Every group selector names a group the traces use."""
    names = set(traces.process_groups) | {n.pg_name for g in traces.graphs.values() for n in g.nodes if n.pg_name}
    known = names | set(traces.group_labels.values()) | {ALL}
    for sel in [*whatif.compress, *whatif.no_comm]:
        if sel not in known:
            raise DistscopeError(f"group {sel!r} is not in the traces (groups: {', '.join(sorted(known))})"
                                 f"{closest(sel, known)}")
    if whatif.placement is not None and len(whatif.placement) != traces.num_ranks:
        raise DistscopeError(f"--place lists {len(whatif.placement)} GPUs for {traces.num_ranks} ranks")
    bad = [r for r in [*whatif.delay_s, *(whatif.compute_ranks or ())] if not 0 <= r < traces.num_ranks]
    if bad:
        raise DistscopeError(f"rank {bad[0]} is not in the traces (0..{traces.num_ranks - 1})")


def apply_to_traces(traces: TraceSet, whatif: WhatIf) -> TraceSet:
    """Compute scaling and delays (a new TraceSet; symmetric sets are expanded only if needed)."""
    if not whatif.changes_traces:
        return traces
    if traces.class_of is not None and (whatif.delay_s or whatif.compute_ranks is not None):
        raise DistscopeError("per-rank what-ifs (--delay-ms, --scale-compute F@RANKS) need a full trace set, "
                             "not a symmetric one")
    graphs = {}
    for rank, g in traces.graphs.items():
        nodes = list(g.nodes)
        if whatif.compute_scale != 1.0 and (whatif.compute_ranks is None or rank in whatif.compute_ranks):
            nodes = [
                dataclasses.replace(n, duration_s=n.duration_s * whatif.compute_scale)
                if n.kind in (NodeKind.COMP, NodeKind.MEM_LOAD, NodeKind.MEM_STORE) and n.name != SKEW_NAME else n
                for n in nodes
            ]
        delay = whatif.delay_s.get(rank, 0.0)
        if delay > 0:
            nodes = _delayed(nodes, delay)
        graphs[rank] = RankGraph(rank=rank, nodes=tuple(nodes), metadata=g.metadata)
    return dataclasses.replace(traces, graphs=graphs)


def _delayed(nodes: list[Node], delay_s: float) -> list[Node]:
    """A COMP node of delay_s on the rank's first lane that every dependency-free node waits for."""
    did = max((n.id for n in nodes), default=-1) + 1
    lane = next((n.lane for n in nodes if n.kind is NodeKind.COMP), "")
    head = Node(id=did, name=DELAY_NAME, kind=NodeKind.COMP, duration_s=delay_s, lane=lane, is_cpu_op=True)
    return [head] + [dataclasses.replace(n, data_deps=(did,)) if not n.deps else n for n in nodes]


class _Algo(Protocol):
    def collective_algo_s(
        self, kind: CollKind, size_bytes: int, members: tuple[int, ...], algorithm: Algorithm | None
    ) -> float: ...


class WhatIfNetwork:
    """A NetworkModel that applies algorithm, compression, removal and placement what-ifs to another."""

    def __init__(self, inner: object, whatif: WhatIf, traces: TraceSet) -> None:
        self.inner = inner
        self.whatif = whatif
        labels = traces.group_labels
        self._labels = labels
        self._dtype = traces.group_dtypes()
        if whatif.algorithms and not hasattr(inner, "collective_algo_s"):
            raise DistscopeError("--algorithm needs --cluster or --profile (ASTRA-sim configs fix their algorithm)")
        self._codec: dict[str, float] = {}
        if whatif.codec_GBps is not None:
            self._codec = {"quant_GBps": whatif.codec_GBps[0], "dequant_GBps": whatif.codec_GBps[1]}
        p = whatif.placement
        if p is not None and max(p) >= inner.num_npus:  # type: ignore[attr-defined]
            raise DistscopeError(f"--place names GPU {max(p)} but the cluster has {inner.num_npus}")  # type: ignore[attr-defined]

    @property
    def num_npus(self) -> int:
        return int(self.inner.num_npus)  # type: ignore[attr-defined]

    def _selected(self, selectors: Mapping[str, object] | frozenset[str], pg: str) -> str | None:
        for key in (pg, self._labels.get(pg, ""), ALL):
            if key and key in selectors:
                return key
        return None

    def _map(self, ranks: Sequence[int]) -> tuple[int, ...]:
        p = self.whatif.placement
        return tuple(ranks) if p is None else tuple(p[r] for r in ranks)

    def _price(self, kind: CollKind, size: int, members: tuple[int, ...], pg: str, net: object = None) -> float:
        net = self.inner if net is None else net
        algo = self.whatif.algorithms.get(kind)
        if algo is not None:
            return float(net.collective_algo_s(kind, size, members, algo))  # type: ignore[attr-defined]
        return float(net.collective_s(kind, size, members, pg))  # type: ignore[attr-defined]

    def collective_s(self, kind: CollKind, size_bytes: int, members: tuple[int, ...], pg_name: str = "") -> float:
        if self._selected(self.whatif.no_comm, pg_name):
            return 0.0
        mapped = self._map(members)
        t = self._price(kind, size_bytes, mapped, pg_name)
        key = self._selected(self.whatif.compress, pg_name)
        if key is None or self.whatif.compress[key] is CompressionMethod.NONE:
            return t
        return self._compressed(t, size_bytes, pg_name, key,
                                lambda net, s: self._price(kind, s, mapped, pg_name, net))

    def _compressed(self, t: float, size_bytes: int, pg: str, key: str,
                    price: Callable[[object, int], float]) -> float:
        """The compressed transfer: its wire bytes priced by the network (a cast's payload with its own
        dtype's measured fits where the profile has them: ProfileNetwork.for_dtype), plus the codec."""
        from distscope.compress.spec import METHOD_SPECS

        method = self.whatif.compress[key]
        spec = METHOD_SPECS[method]
        width = DTYPE_BYTES.get(self._dtype.get(pg, ""), BF16_BYTES)
        r = ratio_vs(spec, width)
        typed = getattr(self.inner, "for_dtype", None)
        net = (typed(spec.wire_dtype) if typed is not None and spec.wire_dtype else None) or self.inner
        cost = compressed_comm_cost(uncompressed_bytes=size_bytes, uncompressed_comm_s=t, method=method,
                                    uncompressed_dtype_bytes=width, quant_GBps=self._codec.get("quant_GBps"),
                                    dequant_GBps=self._codec.get("dequant_GBps"))
        return price(net, round(size_bytes * r)) + cost.quant_s + cost.dequant_s

    def p2p_s(self, src: int, dst: int, size_bytes: int, pg_name: str = "") -> float:
        if self._selected(self.whatif.no_comm, pg_name):
            return 0.0
        a, b = self._map((src, dst))
        t = float(self.inner.p2p_s(a, b, size_bytes, pg_name))  # type: ignore[attr-defined]
        key = self._selected(self.whatif.compress, pg_name)
        if key is None or self.whatif.compress[key] is CompressionMethod.NONE:
            return t
        return self._compressed(t, size_bytes, pg_name, key,
                                lambda net, s: float(net.p2p_s(a, b, s, pg_name)))  # type: ignore[attr-defined]

    def resources(self, members: Sequence[int]) -> tuple[Hashable, ...]:
        return tuple(self.inner.resources(self._map(members)))  # type: ignore[attr-defined]
