"""Themis vs ASTRA-sim 2.0: distscope's finish time for every row of data/reference/astra_sim_themis
(baseline and Themis scheduling on 64-NPU 2-D and 3-D networks with unequal dimension bandwidths), its
error per scheduling pair, and Themis' speed-up over the baseline as ASTRA-sim and distscope each give it.

    python benchmarks/themis_parity.py

Target (issue 23): within 5% of ASTRA-sim's finish time. Rows where ASTRA-sim's own NPUs finish apart
count as matched when the prediction falls inside their range (the error then is to the nearest end).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _results import save

# the reference rows, the prediction and the NPUs' finish range: the parity test's own (one reading)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sim"))
from test_themis_parity import ROWS, _predict_ns, _range_ns


def error(row: dict[str, str], got: float) -> float:
    """Relative distance of `got` to ASTRA-sim's finish range (0 inside it)."""
    lo, hi = _range_ns(row)
    return 0.0 if lo <= got <= hi else (got - (lo if got < lo else hi)) / (lo if got < lo else hi)


def main() -> None:
    rows = ROWS
    t0 = time.perf_counter()
    got = {r["case"]: _predict_ns(r) for r in rows}
    wall = time.perf_counter() - t0
    pairs: dict[str, list[float]] = {}
    for r in rows:
        pairs.setdefault(f"{r['inter_dim']}+{r['intra_dim']}", []).append(abs(error(r, got[r["case"]])) * 100)
    by_key = {(r["network"], r["collective"], r["comm_size_bytes"], r["splits"], r["inter_dim"], r["intra_dim"]): r
              for r in rows}
    speedups = []
    for key, base in by_key.items():
        if key[4:] != ("ascending", "FIFO"):
            continue
        th = by_key.get((*key[:4], "themis", "SCF"))
        if th is not None:
            speedups.append((float(base["finish_ns"]) / float(th["finish_ns"]), got[base["case"]] / got[th["case"]]))
    agree = sum(1 for a, d in speedups if (a > 1) == (d > 1))
    result = {
        "rows": len(rows),
        "within_5pct": sum(1 for v in pairs.values() for e in v if e <= 5.0),
        "by_scheduling": {k: {"rows": len(v), "mean_abs_error_pct": statistics.mean(v), "max_abs_error_pct": max(v)}
                          for k, v in sorted(pairs.items())},
        "themis_speedup": {"groups": len(speedups), "astra_min": min(a for a, _ in speedups),
                           "astra_max": max(a for a, _ in speedups), "astra_faster": sum(1 for a, _ in speedups if a > 1),
                           "same_direction": agree,
                           "max_abs_diff": max(abs(a - d) for a, d in speedups)},
        "wall_s": wall,
    }
    for k, v in result["by_scheduling"].items():
        print(f"{k:>16}: {v['rows']} rows, mean {v['mean_abs_error_pct']:.3f}%, max {v['max_abs_error_pct']:.3f}%")
    s = result["themis_speedup"]
    print(f"Themis/baseline speed-up (ASTRA-sim): {s['astra_min']:.2f}-{s['astra_max']:.2f}x, faster in "
          f"{s['astra_faster']} of {s['groups']}; distscope gives the same direction in {s['same_direction']}")
    save("themis_parity", result)


if __name__ == "__main__":
    main()
