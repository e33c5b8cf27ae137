"""ASTRA-sim analytical-backend inputs: the network `.yml` and the system `.json`.

Network (astra-network-analytical): per dimension `topology` (Ring | FullyConnected | Switch),
`npus_count`, `bandwidth` in GB/s where GB = 2^30 bytes (that backend's convention) and `latency` in ns.
System: `preferred-dataset-splits` (chunks per collective), `active-chunks-per-dimension`,
`endpoint-delay` (ns, added per message), `collective-optimization` (localBWAware | baseline),
`<coll>-implementation` lists (one algorithm per dimension), `local-mem-bw` (GB/s, 1e9 B; prices the
reduction of received data), optional `peak-perf` (TFLOP/s, for COMP nodes that carry only num_ops),
optional `inter-dimension-scheduling` (ascending | themis) and `intra-dimension-scheduling` (FIFO | SCF):
ASTRA-sim 1.0's option names; ASTRA-sim 2.0 keeps the code but no longer reads them from the file.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from distscope.errors import DistscopeError, closest

GIB = float(1 << 30)  # ASTRA-sim analytical: "GB" in bandwidth is 2^30 bytes.


class DimTopology(enum.Enum):
    RING = "Ring"
    FULLY_CONNECTED = "FullyConnected"
    SWITCH = "Switch"


class CollAlgo(enum.Enum):
    """Per-dimension collective algorithms of ASTRA-sim's system layer."""

    RING = "ring"
    DIRECT = "direct"
    HALVING_DOUBLING = "halvingDoubling"


class CollOptimization(enum.Enum):
    LOCAL_BW_AWARE = "localBWAware"
    BASELINE = "baseline"


class InterDimScheduling(enum.Enum):
    """The order in which a chunk visits the dimensions (ASTRA-sim's InterDimensionScheduling).

    `ascending`: dimension 0 upward (all-gather downward). `themis`: Themis' offline greedy (Rashidi et
    al., ISCA'22; astra-sim/system/scheduling/OfflineGreedy.cc), which sends each chunk first through the
    dimension with the least accumulated load."""

    ASCENDING = "ascending"
    THEMIS = "themis"


class IntraDimScheduling(enum.Enum):
    """The order of the chunks waiting at one dimension (ASTRA-sim's IntraDimensionScheduling):
    `FIFO`, or Themis' `SCF` (smallest chunk first; Sys::insert_stream's SmallestFirst)."""

    FIFO = "FIFO"
    SCF = "SCF"


@dataclass(frozen=True, kw_only=True)
class NetworkDim:
    topology: DimTopology
    npus_count: int
    bandwidth_Bps: float
    latency_s: float

    def __post_init__(self) -> None:
        if self.npus_count < 1:
            raise DistscopeError(f"network: npus_count={self.npus_count} must be >= 1")
        if self.bandwidth_Bps <= 0:
            raise DistscopeError(f"network: bandwidth={self.bandwidth_Bps / GIB} GB/s must be > 0")
        if self.latency_s < 0:
            raise DistscopeError(f"network: latency={self.latency_s * 1e9} ns must be >= 0")

    def hops(self, delta: int) -> int:
        """Hops between coordinates `delta` apart: ring takes the shorter way; FC 1; switch 2 (up, down)."""
        if delta == 0:
            return 0
        if self.topology is DimTopology.RING:
            d = abs(delta) % self.npus_count
            return min(d, self.npus_count - d)
        return 1 if self.topology is DimTopology.FULLY_CONNECTED else 2


@dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    dims: tuple[NetworkDim, ...]

    def __post_init__(self) -> None:
        if not self.dims:
            raise DistscopeError("network: at least one dimension is needed")

    @property
    def num_npus(self) -> int:
        n = 1
        for d in self.dims:
            n *= d.npus_count
        return n

    def coords(self, rank: int) -> tuple[int, ...]:
        """Rank -> per-dimension coordinate, dimension 0 varying fastest (ASTRA-sim's numbering)."""
        out = []
        for d in self.dims:
            out.append(rank % d.npus_count)
            rank //= d.npus_count
        return tuple(out)


@dataclass(frozen=True, kw_only=True)
class SystemConfig:
    preferred_dataset_splits: int = 1
    active_chunks_per_dimension: int = 1
    endpoint_delay_s: float = 0.0
    collective_optimization: CollOptimization = CollOptimization.LOCAL_BW_AWARE
    all_reduce_impl: tuple[CollAlgo, ...] = (CollAlgo.RING,)
    all_gather_impl: tuple[CollAlgo, ...] = (CollAlgo.RING,)
    reduce_scatter_impl: tuple[CollAlgo, ...] = (CollAlgo.RING,)
    all_to_all_impl: tuple[CollAlgo, ...] = (CollAlgo.RING,)
    local_mem_bw_Bps: float = 0.0  # 0: reductions are free
    peak_perf_flops: float = 0.0  # 0: COMP nodes use duration_micros only
    inter_dimension_scheduling: InterDimScheduling = InterDimScheduling.ASCENDING
    intra_dimension_scheduling: IntraDimScheduling = IntraDimScheduling.FIFO

    def __post_init__(self) -> None:
        if self.preferred_dataset_splits < 1:
            raise DistscopeError(f"system: preferred-dataset-splits={self.preferred_dataset_splits} must be >= 1")
        if self.active_chunks_per_dimension < 1:
            raise DistscopeError(f"system: active-chunks-per-dimension={self.active_chunks_per_dimension} must be >= 1")
        if self.endpoint_delay_s < 0:
            raise DistscopeError(f"system: endpoint-delay={self.endpoint_delay_s * 1e9} must be >= 0")


def _enum(cls: type[enum.Enum], value: object, field: str, where: str) -> enum.Enum:
    for member in cls:
        if member.value == value or (isinstance(value, str) and member.value.lower() == value.lower()):
            return member
    choices = [m.value for m in cls]
    raise DistscopeError(f"{where}: field {field}={value!r} is not one of {choices}{closest(str(value), choices)}")


def _list(raw: dict, key: str, where: str) -> list:
    if key not in raw:
        raise DistscopeError(f"{where}: missing field {key}")
    value = raw[key]
    return list(value) if isinstance(value, list | tuple) else [value]


def read_network(path: str | Path) -> NetworkConfig:
    """Parse an ASTRA-sim analytical network .yml."""
    where = f"network {str(path)!r}"
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise DistscopeError(f"{where}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise DistscopeError(f"{where}: not YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(raw, dict):
        raise DistscopeError(f"{where}: expected a mapping with topology, npus_count, bandwidth, latency")
    topo = _list(raw, "topology", where)
    npus = _list(raw, "npus_count", where)
    bw = _list(raw, "bandwidth", where)
    lat = _list(raw, "latency", where)
    if not len(topo) == len(npus) == len(bw) == len(lat):
        raise DistscopeError(
            f"{where}: topology, npus_count, bandwidth, latency must have one entry per dimension; "
            f"got {len(topo)}, {len(npus)}, {len(bw)}, {len(lat)}"
        )
    dims = []
    for i, (t, n, b, lt) in enumerate(zip(topo, npus, bw, lat, strict=True)):
        kind = _enum(DimTopology, t, f"topology[{i}]", where)
        assert isinstance(kind, DimTopology)
        dims.append(
            NetworkDim(topology=kind, npus_count=int(n), bandwidth_Bps=float(b) * GIB, latency_s=float(lt) * 1e-9)
        )
    return NetworkConfig(dims=tuple(dims))


# ASTRA-sim 1.0's spellings of the same policies.
_INTER_ALIASES = {"offlineGreedy": "themis"}
_INTRA_ALIASES = {"smallestFirst": "SCF"}


def _impls(raw: dict, key: str, ndims: int, where: str) -> tuple[CollAlgo, ...]:
    values = raw.get(key, ["ring"] * ndims)
    if not isinstance(values, list) or len(values) != ndims:
        raise DistscopeError(f"{where}: field {key}={values!r} needs one algorithm per dimension ({ndims})")
    out = []
    for i, v in enumerate(values):
        algo = _enum(CollAlgo, v, f"{key}[{i}]", where)
        assert isinstance(algo, CollAlgo)
        out.append(algo)
    return tuple(out)


def read_system(path: str | Path, ndims: int) -> SystemConfig:
    """Parse an ASTRA-sim system .json for a network of `ndims` dimensions."""
    where = f"system {str(path)!r}"
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as exc:
        raise DistscopeError(f"{where}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise DistscopeError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(raw, dict):
        raise DistscopeError(f"{where}: expected a JSON object")
    opt = _enum(CollOptimization, raw.get("collective-optimization", "baseline"), "collective-optimization", where)
    assert isinstance(opt, CollOptimization)
    inter_raw = raw.get("inter-dimension-scheduling", "ascending")
    inter = _enum(InterDimScheduling, _INTER_ALIASES.get(str(inter_raw), inter_raw), "inter-dimension-scheduling", where)
    intra_raw = raw.get("intra-dimension-scheduling", "FIFO")
    intra = _enum(IntraDimScheduling, _INTRA_ALIASES.get(str(intra_raw), intra_raw), "intra-dimension-scheduling", where)
    assert isinstance(inter, InterDimScheduling) and isinstance(intra, IntraDimScheduling)
    return SystemConfig(
        preferred_dataset_splits=int(raw.get("preferred-dataset-splits", 1)),
        active_chunks_per_dimension=int(raw.get("active-chunks-per-dimension", 1)),
        endpoint_delay_s=float(raw.get("endpoint-delay", 0)) * 1e-9,
        collective_optimization=opt,
        all_reduce_impl=_impls(raw, "all-reduce-implementation", ndims, where),
        all_gather_impl=_impls(raw, "all-gather-implementation", ndims, where),
        reduce_scatter_impl=_impls(raw, "reduce-scatter-implementation", ndims, where),
        all_to_all_impl=_impls(raw, "all-to-all-implementation", ndims, where),
        local_mem_bw_Bps=float(raw.get("local-mem-bw", 0)) * 1e9,
        peak_perf_flops=float(raw.get("peak-perf", 0)) * 1e12,
        inter_dimension_scheduling=inter,
        intra_dimension_scheduling=intra,
    )
