"""Measured figures for distscope.compress: ratio, error on real TinyGPT tensors, CPU quantize/dequantize
GB/s, and collective time vs uncompressed on 4 gloo ranks. Prints a table; the LAST line is the JSON.

    PYTHONPATH=src python benchmarks/compress_bench.py [--out compress_bench.json] [--numel N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from _results import save
from distscope.compress.bench import BenchConfig, run_bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="", help="also write the JSON here (it always goes to benchmarks/results/compress_bench.json)")
    ap.add_argument("--numel", type=int, default=1 << 22, help="elements per rank in timed collectives")
    ap.add_argument("--repeats", type=int, default=3, help="timed repetitions (median)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = run_bench(BenchConfig(numel=args.numel, repeats=args.repeats),
                    progress=lambda m: print(f"[{time.perf_counter() - t0:6.1f}s] {m}", file=sys.stderr))
    res["wall_s"] = time.perf_counter() - t0
    hdr = f"{'method':10s} {'ratio/bf16':>10s} {'relL2':>9s} {'q GB/s':>7s} {'dq GB/s':>7s} " \
          f"{'coll s':>8s} {'base s':>8s} {'speedup':>7s}  error on"
    print(hdr)
    for m in res["methods"]:
        print(f"{m['name']:10s} {m['ratio_vs_bf16']:10.4f} {m['rel_l2_error']:9.4g} {m['quant_GBps']:7.3g} "
              f"{m['dequant_GBps']:7.3g} {m['collective_s']:8.4f} {m['uncompressed_s']:8.4f} "
              f"{m['speedup_vs_uncompressed']:6.2f}x  {m['error_on']}")
    hooks = res["ddp_hooks"]
    print("DDP hooks (TinyGPT, 4 gloo ranks): " + ", ".join(
        f"{k}: step {v['step_s'] * 1e3:.0f} ms, relL2 {v['rel_l2_error']:.3g}" for k, v in hooks.items()))
    text = json.dumps(res)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    save("compress_bench", res)


if __name__ == "__main__":
    main()
