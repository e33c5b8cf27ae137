"""System profile: alpha-beta collective costs measured on a real system (written by `measure calibrate`).

Schema (JSON, "schema": "distscope.system_profile/1"):

    {
      "schema": "distscope.system_profile/1",
      "name":   "<cluster or device name>",
      "device": "<device description, e.g. 'cpu gloo' or 'NVIDIA H100 80GB HBM3'>",
      "source": "<what was measured: tool, command, date>",
      "levels": {
        "<topology level, e.g. 'intra_node', 'inter_node', 'default'>": {
          "<op: all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | send_recv | ...>": {
            "alpha_s": <latency, s>,
            "beta_s_per_byte": <s per nccl-tests byte at this nranks>,
            "max_rel_err": <max |pred - meas| / meas over the fitted sweep>,
            "n_points": <int>, "min_bytes": <int>, "max_bytes": <int>,
            "nranks": <ranks the sweep ran on>, "dtype": "<dtype swept>"
          }
        }
      },
      "kernels": { ... },  (optional: GEMM/attention/element-wise tables, measure/kernel_profile.py)
      "dtypes": {"<torch dtype, e.g. 'float16'>": {<level>: {<op>: {...fit...}}}}
                           (optional: a sweep of several dtypes keeps each one's fits here; "levels" holds
                            float32's, or the first dtype's)
    }

A profile may hold only levels, only kernels (then "levels" is {}), or both.
Bytes follow nccl-tests (all_gather: output, reduce_scatter: input, else the buffer), so
t(S) = alpha_s + beta_s_per_byte * S, and the bus bandwidth at nranks is factor(op, nranks) / beta.
This module is torch-free: `estimate`/`validate` load profiles with it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError, closest
from distscope.measure.kernel_profile import KernelProfile, kernel_device_warning
from distscope.userfile import read_json, write_text

SCHEMA = "distscope.system_profile/1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpFit:
    alpha_s: float
    beta_s_per_byte: float
    max_rel_err: float
    n_points: int
    min_bytes: int
    max_bytes: int
    nranks: int
    dtype: str

    def __post_init__(self) -> None:
        for f in ("alpha_s", "beta_s_per_byte", "max_rel_err", "n_points", "min_bytes", "max_bytes", "nranks"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
                raise DistscopeError(f"{f}={v!r} must be a finite number")
        if self.alpha_s < 0 or self.beta_s_per_byte < 0:
            raise DistscopeError(
                f"alpha_s={self.alpha_s}, beta_s_per_byte={self.beta_s_per_byte} must be >= 0"
            )
        if self.nranks < 1:
            raise DistscopeError(f"nranks={self.nranks} must be >= 1")

    def time_s(self, size_bytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * size_bytes

    def busbw_GBps(self, op: Collective) -> float:
        """Asymptotic bus bandwidth implied by beta (inf when beta is 0)."""
        return (
            float("inf")
            if self.beta_s_per_byte == 0
            else op.busbw_factor(self.nranks) / self.beta_s_per_byte / 1e9
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SystemProfile:
    name: str
    levels: dict[str, dict[Collective, OpFit]]
    device: str = ""
    source: str = ""
    kernels: KernelProfile | None = None
    # {dtype: {level: {op: fit}}} of every dtype a multi-dtype sweep measured (a reduction's cost per byte
    # depends on the element type: gloo sums float16 at about half float32's bytes per second)
    by_dtype: dict[str, dict[str, dict[Collective, OpFit]]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.levels and self.kernels is None:
            raise DistscopeError(f"profile name={self.name!r} has no levels and no kernels")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "device": self.device,
            "source": self.source,
            "levels": _levels_dict(self.levels),
            **({"kernels": self.kernels.to_dict()} if self.kernels is not None else {}),
            **({"dtypes": {dt: _levels_dict(lv) for dt, lv in self.by_dtype.items()}} if self.by_dtype else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "profile") -> SystemProfile:
        if d.get("schema") != SCHEMA:
            raise DistscopeError(f"{where}: schema={d.get('schema')!r}, expected {SCHEMA!r}")
        if not isinstance(d.get("levels", {}), dict):
            raise DistscopeError(f"{where}: 'levels' must be an object")
        if not isinstance(d.get("dtypes", {}), dict):
            raise DistscopeError(f"{where}: 'dtypes' must be an object")
        return cls(
            name=str(d.get("name", "")),
            device=str(d.get("device", "")),
            source=str(d.get("source", "")),
            levels=_levels_from(d.get("levels", {}), where, "levels"),
            kernels=KernelProfile.from_dict(d["kernels"], f"{where} kernels") if "kernels" in d else None,
            by_dtype={str(dt): _levels_from(lv, where, f"dtypes {dt}") for dt, lv in d.get("dtypes", {}).items()},
        )


def _levels_dict(levels: dict[str, dict[Collective, OpFit]]) -> dict[str, Any]:
    return {lvl: {op.value: dataclasses.asdict(fit) for op, fit in ops.items()} for lvl, ops in levels.items()}


def _levels_from(raw: Any, where: str, what: str) -> dict[str, dict[Collective, OpFit]]:
    """{level: {op: fit}} from its JSON form; one line naming the entry otherwise."""
    fields = {f.name for f in dataclasses.fields(OpFit)}
    try:
        return {
            str(lvl): {
                Collective.parse(op, field=f"{where} {what} level {lvl} op"): OpFit(**{k: fit[k] for k in fields})
                for op, fit in ops.items()
            }
            for lvl, ops in raw.items()
        }
    except KeyError as exc:
        raise DistscopeError(f"{where}: {what}: missing field {exc.args[0]!r}") from None
    except (AttributeError, TypeError) as exc:  # a level or op entry that is not an object of numbers
        raise DistscopeError(f"{where}: malformed {what!r} ({exc})") from None


def save_profile(profile: SystemProfile, path: Path) -> None:
    write_text(path, json.dumps(profile.to_dict(), indent=1) + "\n", "profile")


def load_profile(path: Path) -> SystemProfile:
    data = read_json(path, "profile")
    return SystemProfile.from_dict(data, where=f"profile={str(path)!r}")


def profile_warnings(profile: SystemProfile, device_name: str, max_fit_err: float = 0.2) -> list[str]:
    """Suspicious-but-legal profiles: measured on another kind of device, or fitted badly."""
    out = []
    desc = profile.device.lower()
    family = device_name.split("-")[0].lower()  # e.g. 'h100' of 'h100-sxm5-80gb'
    if profile.kernels is not None and (w := kernel_device_warning(profile.kernels, device_name)):
        out.append(w)
    if profile.levels and desc and family not in desc.replace(" ", "").replace("-", ""):
        out.append(f"profile {profile.name!r} was measured on {profile.device!r}, not a {device_name}: its "
                   "measured links replace the cluster's")
    for lvl, ops in profile.levels.items():
        for op, fit in ops.items():
            if fit.max_rel_err > max_fit_err:
                out.append(f"profile {profile.name!r} level {lvl} {op.value}: the α-β line misses its own points by "
                           f"up to {100 * fit.max_rel_err:.0f}% (> {100 * max_fit_err:.0f}%)")
    return out


def alpha_beta(profile: SystemProfile, level: str) -> dict[Collective, tuple[float, float]]:
    """{op: (alpha_s, beta_s_per_byte)} for one topology level of a profile (pure)."""
    if level not in profile.levels:
        raise DistscopeError(
            f"level={level!r} is not in profile {profile.name!r}{closest(level, profile.levels)}"
        )
    return {op: (fit.alpha_s, fit.beta_s_per_byte) for op, fit in profile.levels[level].items()}
