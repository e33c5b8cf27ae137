"""Parse the stdout of NVIDIA nccl-tests (all_reduce_perf, all_gather_perf, ...) into CollectiveResults.

Format (nccl-tests README / src/common.cu): `#` header lines (arguments, one `#  Rank ...` line per rank,
the two-line column header with units), then one row per size:

    size  count  type  redop  root  | time algbw busbw #wrong | time algbw busbw #wrong
     (B)  (elements)                   (us) (GB/s) (GB/s)       (us) (GB/s) (GB/s)

out-of-place columns first, in-place second; `#wrong` is N/A when validation is off. Rows we emit keep the
time (converted us -> s); algbw/busbw are recomputed from it with the same nccl-tests formulas, and a row
whose printed busbw disagrees with the recomputed one by more than the printed rounding is rejected,
because it means the op or nranks was guessed wrong.
"""

from __future__ import annotations

import re

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.measure.result import CollectiveResult

_DTYPES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "bfloat16": "bfloat16",
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "int": "int32",
    "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
}
_OP_RE = re.compile(
    r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|gather|scatter"
    r"|hypercube)_perf\b"
)
_ITERS_RE = re.compile(r"warmup iters:\s*\d+\s+iters:\s*(\d+)")


def _infer_op(text: str) -> Collective:
    m = _OP_RE.search(text)
    if m is None:
        raise DistscopeError(
            "op=None: the nccl-tests output does not name its binary; pass the op explicitly"
        )
    return Collective.parse(m.group(1))


def _row_numbers(tokens: list[str]) -> tuple[int, int, str, list[str]] | None:
    if len(tokens) < 8 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    return int(tokens[0]), int(tokens[1]), tokens[2], tokens[3:]


def parse_nccl_tests(
    text: str,
    *,
    op: Collective | None = None,
    nranks: int | None = None,
    level: str = "default",
    source: str = "nccl-tests",
    device: str = "",
) -> list[CollectiveResult]:
    """All rows, out-of-place and in-place (`in_place` tells them apart)."""
    op = op or _infer_op(text)
    rank_lines = [ln for ln in text.splitlines() if re.match(r"#\s+Rank\s+\d+\s", ln)]
    m_iters = _ITERS_RE.search(text)
    iters = int(m_iters.group(1)) if m_iters else 1
    rows = []
    for ln in text.splitlines():
        if ln.lstrip().startswith("#"):
            continue
        parsed = _row_numbers(ln.split())
        if parsed is not None:
            rows.append((ln, *parsed))
    if not rows:
        raise DistscopeError("nccl-tests output has no result rows (expected lines 'size count type ...')")
    results: list[CollectiveResult] = []
    n = nranks or len(rank_lines)
    if not n:  # the largest row prints the most significant digits of busbw/algbw
        _ln, _s, _c, _t, rest = max(rows, key=lambda r: r[1])
        first = -8 if len(rest) >= 8 else -4  # out-of-place group: time, algbw, busbw, #wrong
        n = _nranks_from_ratio(op, float(rest[first + 1]), float(rest[first + 2]))
    for ln, size, _count, type_name, rest in rows:
        # The trailing groups of 4 are (time, algbw, busbw, #wrong); redop/root columns come before them.
        groups = (
            [rest[i : i + 4] for i in range(len(rest) - 8, len(rest), 4)] if len(rest) >= 8 else [rest[-4:]]
        )
        for in_place, g in zip((False, True), groups, strict=False):
            time_us, busbw = float(g[0]), float(g[2])
            _check_busbw(op, n, size, time_us, busbw, ln)
            t = time_us * 1e-6
            results.append(
                CollectiveResult(
                    op=op,
                    bytes=size,
                    dtype=_DTYPES.get(type_name, type_name),
                    nranks=n,
                    time_s=t,
                    time_min_s=t,
                    time_max_s=t,
                    iters=iters,
                    level=level,
                    in_place=in_place,
                    backend="nccl",
                    source=source,
                    device=device,
                )
            )
    return results


def _nranks_from_ratio(op: Collective, algbw: float, busbw: float) -> int:
    """Invert busbw/algbw = 2(n-1)/n or (n-1)/n; impossible for factor-1 ops (give nranks then)."""
    if algbw <= 0 or op not in (
        Collective.ALL_REDUCE,
        Collective.ALL_GATHER,
        Collective.REDUCE_SCATTER,
        Collective.ALL_TO_ALL,
    ):
        raise DistscopeError(f"nranks=None: cannot infer it for op={op.value}; pass nranks")
    r = busbw / algbw / (2.0 if op is Collective.ALL_REDUCE else 1.0)
    if r >= 0.999:
        raise DistscopeError(f"nranks=None: busbw/algbw={busbw / algbw:.3f} does not fit op={op.value}")
    return max(1, round(1.0 / (1.0 - r)))


def _check_busbw(op: Collective, n: int, size: int, time_us: float, busbw: float, line: str) -> None:
    if time_us <= 0:
        raise DistscopeError(f"time={time_us} us must be > 0 in line {line.strip()!r}")
    expect = size / (time_us * 1e-6) / 1e9 * op.busbw_factor(n)
    # nccl-tests prints 2 decimals and the time with ~4 significant digits.
    if abs(expect - busbw) > 0.006 + 2e-3 * max(expect, busbw):
        raise DistscopeError(
            f"busbw={busbw} in line {line.strip()!r} does not match op={op.value} nranks={n} "
            f"(expected {expect:.2f}); check op and nranks"
        )
