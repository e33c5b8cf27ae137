"""Network model from a measured α-β profile (`distscope measure collectives` + `measure calibrate`).

Each collective is priced with the fit measured for its own op: t = α + β·S, S in nccl-tests bytes
(all_gather: the gathered output = n · Chakra's per-rank comm_size; every other op: the buffer).
A fit measured at m ranks is carried to a group of n ranks with the ring model the fit's bus bandwidth
implies (system/calibrated.py): the bus bandwidth factor(op, m)/β stays, so β_n = β_m · f(n)/f(m), and
the per-step latency α_m/steps(m) stays, so α_n = α_m · steps(n)/steps(m) (nccl-tests busbw factors;
ring steps 2(n-1) for all-reduce, n-1 for all-gather/reduce-scatter/all-to-all/broadcast). A group of
one costs nothing. Point-to-point messages use the send_recv fit. The level is the profile's only
level, or the one named. A profile swept in several dtypes prices a group's collectives with the fits of
the dtype its traces record (`with_group_dtypes`: a captured bf16 all-reduce at bfloat16's measured α-β,
not float32's; gloo sums halves at about half float32's bytes per second).

What-if knobs (sim/whatif.py): `bw_scale` divides β, `latency_scale` multiplies α, and `algorithm`
re-prices with another algorithm relative to the ring: t · t_alg/t_ring, both from comm/'s α-β cost
functions on a one-level group with the fit's bus bandwidth and per-step latency (the measured fit
already contains whatever algorithm the library ran).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Hashable, Mapping, Sequence

from distscope.comm import Algorithm, Collective, GroupNet, collective_time
from distscope.errors import DistscopeError, closest
from distscope.measure.profile import OpFit, SystemProfile
from distscope.sim.network import PRICED_AS
from distscope.system.calibrated import RING_STEPS
from distscope.trace.graph import CollKind

# a capture's element type names (ET's 'Tensor(c10::BFloat16)') as `measure collectives --dtypes` names them
TORCH_DTYPE = {"float": "float32", "double": "float64", "c10::Half": "float16", "half": "float16",
               "c10::BFloat16": "bfloat16", "long": "int64", "long int": "int64", "int": "int32",
               "signed char": "int8", "unsigned char": "uint8"}


def nccl_bytes(kind: CollKind, comm_size_bytes: int, n: int) -> int:
    """nccl-tests bytes of a Chakra collective (all_gather counts the gathered output)."""
    return comm_size_bytes * n if kind is CollKind.ALL_GATHER else comm_size_bytes


def scaled_fit(op: Collective, fit: OpFit, n: int) -> tuple[float, float]:
    """(α, β) for n ranks from a fit at fit.nranks (module docstring)."""
    m = fit.nranks
    if n == m or op is Collective.SEND_RECV:
        return fit.alpha_s, fit.beta_s_per_byte
    steps = RING_STEPS.get(op, RING_STEPS[Collective.ALL_GATHER])
    f_m, f_n = op.busbw_factor(m), op.busbw_factor(n)
    alpha = fit.alpha_s * steps(n) / steps(m) if steps(m) else fit.alpha_s
    beta = fit.beta_s_per_byte * f_n / f_m if f_m else fit.beta_s_per_byte
    return alpha, beta


class ProfileNetwork:
    """NetworkModel pricing every transfer with the measured fits of one profile level."""

    def __init__(
        self,
        profile: SystemProfile,
        num_npus: int | None = None,
        *,
        level: str | None = None,
        bw_scale: float = 1.0,
        latency_scale: float = 1.0,
    ) -> None:
        if level is None:
            if len(profile.levels) != 1:
                raise DistscopeError(
                    f"profile {profile.name!r} has levels {sorted(profile.levels)}; name one with --profile-level"
                )
            level = next(iter(profile.levels))
        if level not in profile.levels:
            raise DistscopeError(f"--profile-level={level!r} is not in profile {profile.name!r}"
                                 f"{closest(level, profile.levels)}")
        if bw_scale <= 0 or latency_scale < 0:
            raise DistscopeError(f"bandwidth scale {bw_scale} must be > 0 and latency scale {latency_scale} >= 0")
        self.level = level
        self.fits = profile.levels[level]
        self.profile = profile
        self.profile_name = profile.name
        self._npus = num_npus
        self._bw = bw_scale
        self._lat = latency_scale
        self._group_fits: dict[str, dict[Collective, OpFit]] = {}  # groups whose payload has its own fits

    def _dtype_fits(self, dtype: str) -> dict[Collective, OpFit] | None:
        """This level's fits with `dtype`'s measured ones in their place (a capture's 'c10::Half' is
        float16); None when the profile did not sweep that dtype here."""
        fits = self.profile.by_dtype.get(TORCH_DTYPE.get(dtype, dtype), {}).get(self.level)
        return {**self.fits, **fits} if fits else None

    def for_dtype(self, dtype: str) -> ProfileNetwork | None:
        """The same network priced with `dtype`'s fits where the profile measured them (other ops keep
        this one's), for every group; None when it has none at this level."""
        fits = self._dtype_fits(dtype)
        if fits is None:
            return None
        net = copy.copy(self)
        net.fits, net._group_fits = fits, {}
        return net

    def with_group_dtypes(self, group_dtypes: Mapping[str, str]) -> ProfileNetwork:
        """This network, pricing each named group's collectives with the fits of its payload's dtype where
        the profile swept that dtype (TraceSet.group_dtypes; other groups and ops keep this one's fits)."""
        net = copy.copy(self)
        net._group_fits = {pg: fits for pg, dtype in group_dtypes.items() if (fits := self._dtype_fits(dtype))}
        return net

    @property
    def num_npus(self) -> int:
        """A profile prices any number of ranks (None: as many as the traces have)."""
        return sys.maxsize if self._npus is None else self._npus

    def _fit(self, op: Collective, pg: str = "") -> OpFit:
        fit = self._group_fits.get(pg, self.fits).get(op)
        if fit is None:
            have = ", ".join(sorted(o.value for o in self.fits))
            raise DistscopeError(
                f"profile {self.profile_name!r} level {self.level!r} has no {op.value} fit (has {have}); "
                f"measure it: distscope measure collectives --ops {op.value}"
            )
        return fit

    def _alpha_beta(self, op: Collective, n: int, pg: str = "") -> tuple[float, float]:
        a, b = scaled_fit(op, self._fit(op, pg), n)
        return a * self._lat, b / self._bw

    def collective_s(self, kind: CollKind, size_bytes: int, members: tuple[int, ...], pg_name: str = "") -> float:
        return self.collective_algo_s(kind, size_bytes, members, None, pg_name)

    def collective_algo_s(
        self, kind: CollKind, size_bytes: int, members: tuple[int, ...], algorithm: Algorithm | None,
        pg_name: str = "",
    ) -> float:
        n = len(members)
        if n <= 1:
            return 0.0
        op = PRICED_AS.get(kind)
        if op is None:
            raise DistscopeError(f"comm_type={kind.value} has no measured cost model")
        size = 0 if kind is CollKind.BARRIER else nccl_bytes(kind, size_bytes, n)
        a, b = self._alpha_beta(op, n, pg_name)
        t = a + b * size
        if algorithm is None:
            return t
        steps = RING_STEPS.get(op, RING_STEPS[Collective.ALL_GATHER])(n)
        bus = op.busbw_factor(n) / b if b > 0 else float("inf")
        g = GroupNet(n=n, fanout=(n,), alpha_s=a / steps, bus_Bps=bus, levels=((n, a / steps, bus),),
                     a2a_parts=(((n - 1) / n, bus),), nvls=None)
        ring, _ = collective_time(op, float(max(size, 1)), g, Algorithm.DIRECT if op is Collective.ALL_TO_ALL
                                  else Algorithm.RING)
        alt, _ = collective_time(op, float(max(size, 1)), g, algorithm)
        return t * alt / ring if ring > 0 else t

    def p2p_s(self, src: int, dst: int, size_bytes: int, pg_name: str = "") -> float:
        a, b = self._alpha_beta(Collective.SEND_RECV, 2, pg_name)
        return a + b * size_bytes

    def resources(self, members: Sequence[int]) -> tuple[Hashable, ...]:
        return tuple((r, 0) for r in members)
