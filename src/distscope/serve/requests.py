"""Requests and arrival processes: Poisson, fixed concurrency (closed loop), a burst, or a trace file.

Lengths are fixed, or drawn from an exponential distribution of the given mean (coefficient of
variation 1, the usual stand-in for chat traces; clipped like vLLM's benchmark_serving filter for
ShareGPT: prompts of 4-1024 tokens, outputs of at least 4, prompt + output at most `max_total`).
Draws are deterministic for a seed (numpy's PCG64).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

import numpy as np

from distscope.errors import DistscopeError
from distscope.userfile import parse_csv, read_text

MAX_REQUESTS = 500_000  # ~10 s of simulation on one core


class Arrival(enum.Enum):
    POISSON = "poisson"
    CONCURRENCY = "concurrency"  # a closed loop: a new request as soon as one finishes
    BURST = "burst"  # every request at t = 0
    TRACE = "trace"  # arrival, input_len, output_len from a file


class LengthDist(enum.Enum):
    FIXED = "fixed"
    EXPONENTIAL = "exponential"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    arrival: Arrival
    requests: int
    input_len: int = 0
    output_len: int = 0
    rate_per_s: float = 0.0  # POISSON
    concurrency: int = 0  # CONCURRENCY
    lengths: LengthDist = LengthDist.FIXED
    max_total: int = 0  # clip for EXPONENTIAL (0 = no clip beyond the benchmark_serving filter)
    seed: int = 0
    trace: tuple[tuple[float, int, int], ...] = ()  # TRACE

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise DistscopeError(f"seed={self.seed} must be >= 0")
        if self.arrival is Arrival.TRACE:
            if not self.trace:
                raise DistscopeError("trace: the file holds no requests")
            return
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise DistscopeError(f"requests={self.requests} must be in 1..{MAX_REQUESTS:,} (simulate longer loads in pieces)")
        if self.input_len < 1 or self.output_len < 1:
            raise DistscopeError(f"input_len={self.input_len}, output_len={self.output_len} must be >= 1")
        if self.arrival is Arrival.POISSON and not self.rate_per_s > 0:
            raise DistscopeError(f"rate={self.rate_per_s} must be > 0 requests/s")
        if self.arrival is Arrival.CONCURRENCY and self.concurrency < 1:
            raise DistscopeError(f"concurrency={self.concurrency} must be >= 1")

    @property
    def count(self) -> int:
        return len(self.trace) if self.arrival is Arrival.TRACE else self.requests


def lengths(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """(input_len, output_len) per request as int arrays."""
    n = w.count
    if w.arrival is Arrival.TRACE:
        return (np.array([t[1] for t in w.trace], dtype=np.int64), np.array([t[2] for t in w.trace], dtype=np.int64))
    if w.lengths is LengthDist.FIXED:
        return np.full(n, w.input_len, dtype=np.int64), np.full(n, w.output_len, dtype=np.int64)
    rng = np.random.default_rng(w.seed + 1)
    hi_in = 1024 if w.max_total == 0 else min(1024, w.max_total - 4)
    ins = _clipped_exponential(rng, w.input_len, 4, np.full(n, hi_in), n)
    hi_out = np.full(n, 1 << 30) if w.max_total == 0 else np.maximum(4, w.max_total - ins)
    return ins, _clipped_exponential(rng, w.output_len, 4, hi_out, n)


def _clipped_exponential(rng: np.random.Generator, mean: float, lo: int, hi: np.ndarray, n: int) -> np.ndarray:
    """Exponential draws rescaled so that the clipped sample keeps the requested mean."""
    x = rng.exponential(1.0, n)
    scale = float(mean)
    for _ in range(30):  # fixed point: mean of clip(scale·x) == mean
        m = float(np.clip(np.rint(scale * x), lo, hi).mean())
        if abs(m - mean) < 0.05:
            break
        scale *= mean / m
    return np.clip(np.rint(scale * x), lo, hi).astype(np.int64)


def arrival_times(w: Workload) -> np.ndarray | None:
    """Open-loop arrival times in seconds (None for a closed loop)."""
    if w.arrival is Arrival.TRACE:
        return np.array([t[0] for t in w.trace], dtype=float)
    if w.arrival is Arrival.BURST:
        return np.zeros(w.requests)
    if w.arrival is Arrival.POISSON:
        rng = np.random.default_rng(w.seed)
        return np.cumsum(rng.exponential(1.0 / w.rate_per_s, w.requests))
    return None


def read_trace(path: str) -> tuple[tuple[float, int, int], ...]:
    """A trace of requests: CSV with a header naming arrival_s (or arrival/timestamp), input_len and
    output_len, or JSON lines with those keys. Rows sorted by arrival; every error names line and field."""
    text = read_text(path, "--trace")
    rows: list[dict[str, Any]] = []
    stripped = text.lstrip()
    if stripped.startswith("{"):
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    obj = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    obj = None
                if not isinstance(obj, dict):
                    raise DistscopeError(f"--trace={path!r} line {i}: not a JSON object")
                rows.append({"_line": i, **obj})
    else:  # header names normalised (byte-order mark, spaces) in userfile.parse_csv, as for every CSV
        for i, cells in parse_csv(text, "--trace", path)[1]:
            extra = [x for x in cells.get(None) or [] if (x or "").strip()]  # cells past the header's last column
            if extra:
                raise DistscopeError(f"--trace={path!r} line {i}: more cells than the header has columns "
                                     f"(extra: {', '.join(repr(x) for x in extra[:3])})")
            rows.append({"_line": i, **{k: v for k, v in cells.items() if k is not None}})
    if not rows:
        raise DistscopeError(f"--trace={path!r}: no requests (need a header with arrival_s, input_len, output_len)")
    out: list[tuple[float, int, int]] = []
    for r in rows:
        line = r["_line"]
        arr = _field(r, ("arrival_s", "arrival", "timestamp"), float, path, line)
        i_len = _field(r, ("input_len", "prompt_len", "input_tokens"), int, path, line)
        o_len = _field(r, ("output_len", "output_tokens"), int, path, line)
        if arr < 0 or i_len < 1 or o_len < 1:
            raise DistscopeError(f"--trace={path!r} line {line}: arrival_s={arr}, input_len={i_len}, output_len={o_len} "
                                 "(need arrival >= 0 and lengths >= 1)")
        out.append((float(arr), int(i_len), int(o_len)))
    out.sort(key=lambda t: t[0])
    return tuple(out)


def _field(r: dict[str, Any], names: tuple[str, ...], kind: type, path: str, line: object) -> Any:
    for n in names:
        if n in r and r[n] not in (None, ""):
            v = r[n]
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise DistscopeError(f"--trace={path!r} line {line}: {n}={v!r} is not a number") from None
            if not math.isfinite(f):
                raise DistscopeError(f"--trace={path!r} line {line}: {n}={v!r} is not a finite number")
            if kind is int and f != int(f):
                raise DistscopeError(f"--trace={path!r} line {line}: {n}={v!r} is not an integer")
            return int(f) if kind is int else f
    raise DistscopeError(f"--trace={path!r} line {line}: missing field {names[0]}")
