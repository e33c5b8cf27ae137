"""Serving metrics from per-request timestamps, as the benchmark clients define them.

TTFT = first token − arrival; TPOT = (finish − first token)/(output − 1) per request (vLLM's
benchmark_serving); mean ITL = Σ(finish − first)/Σ(output − 1) over requests (the token-weighted mean
of inter-token gaps, what genai-perf and NIM report as "avg ITL"); latency = finish − arrival;
throughput = output tokens / (last finish − first arrival); goodput = requests per second that meet
every SLO (DistServe, Zhong et al. OSDI'24).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from distscope.errors import DistscopeError

PCTS = (50, 90, 99)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Slo:
    ttft_s: float = math.inf
    tpot_s: float = math.inf

    def label(self) -> str:
        parts = []
        if math.isfinite(self.ttft_s):
            parts.append(f"ttft ≤ {self.ttft_s:g} s")
        if math.isfinite(self.tpot_s):
            parts.append(f"tpot ≤ {self.tpot_s:g} s")
        return " and ".join(parts) or "no SLO"


def parse_slo(value: str | None) -> Slo | None:
    """`ttft=0.5,tpot=0.05` (seconds; `ms` suffix accepted)."""
    if not value:
        return None
    out: dict[str, float] = {}
    for item in value.split(","):
        k, _, v = item.partition("=")
        k = k.strip().lower()
        if k not in ("ttft", "tpot"):
            raise DistscopeError(f"--slo={value!r}: {k!r} is not ttft or tpot")
        v = v.strip().lower()
        scale = 1e-3 if v.endswith("ms") else 1.0
        try:
            x = float(v.removesuffix("ms").removesuffix("s")) * scale
        except ValueError:
            raise DistscopeError(f"--slo={value!r}: {k}={v!r} is not a number of seconds") from None
        if not x > 0:
            raise DistscopeError(f"--slo={value!r}: {k} must be > 0")
        out[f"{k}_s"] = x
    return Slo(**out)


def summarize(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, out: np.ndarray,
              slo: Slo | None = None) -> dict[str, float]:
    ok = ~np.isnan(finish)
    if not ok.any():
        raise DistscopeError("no request finished (the replica could not admit any)")
    a, f, e, o = arrival[ok], first[ok], finish[ok], out[ok].astype(float)
    ttft = f - a
    lat = e - a
    multi = o > 1
    tpot = (e[multi] - f[multi]) / (o[multi] - 1) if multi.any() else np.zeros(1)
    duration = float(e.max() - a.min())
    res: dict[str, float] = {"requests": float(ok.sum()), "duration_s": duration}
    for name, v in (("ttft_s", ttft), ("tpot_s", tpot), ("latency_s", lat)):
        res[f"{name}_mean"] = float(v.mean())
        for p in PCTS:
            res[f"{name}_p{p}"] = float(np.percentile(v, p))
    res["itl_s_mean"] = float((e[multi] - f[multi]).sum() / (o[multi] - 1).sum()) if multi.any() else 0.0
    res["throughput_out_tok_s"] = float(o.sum() / duration) if duration > 0 else math.inf
    res["throughput_req_s"] = float(ok.sum() / duration) if duration > 0 else math.inf
    if slo is not None:
        tp = np.zeros(len(o))
        tp[multi] = (e[multi] - f[multi]) / (o[multi] - 1)
        good = (ttft <= slo.ttft_s) & (tp <= slo.tpot_s)
        res["slo_attainment"] = float(good.mean())
        res["goodput_req_s"] = float(good.sum() / duration) if duration > 0 else 0.0
    return res
