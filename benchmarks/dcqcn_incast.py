"""DCQCN at flow level (fabric/dcqcn.py) against the max-min ideal: its reaction to incast, what it does to
colliding all-to-all traffic under ECMP, and its cost in wall time.

    python benchmarks/dcqcn_incast.py

- incast: N GPUs of a dgx-h100 preset fabric (400 Gb/s NICs, rail-optimized Clos) send S bytes each to
  GPU 0 at once; slowdown = DCQCN's completion over the ideal (the receiver's NIC at line rate);
- EP-64 all-to-all on 1,024 GPUs with ECMP: the share of NIC bandwidth the step gets, ideal and DCQCN, and
  the fluid run's wall time on one core;
- a rail-aligned ring all-reduce (DP over one GPU per node, 1,024 GPUs): untouched by congestion control.
- against ns-3 (data/reference/ns3_dcqcn): the slowdown of 16 packet-level incast runs (2-16 senders, 1 and
  10 MB, two ECN threshold settings) as distscope gives it with the same parameters.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _results import save
from distscope.comm.collective import Collective
from distscope.fabric.build import fabric_for_cluster
from distscope.fabric.collective import pattern, siblings, step_verdict
from distscope.fabric.dcqcn import CongestionControl
from distscope.fabric.routing import Router, Routing
from distscope.system.presets import get_cluster

SENDERS = (2, 8, 32)
SIZES = (1e6, 16e6, 128e6)


def main() -> None:
    f = fabric_for_cluster(get_cluster("dgx-h100", 64))
    router = Router(f)
    incast = []
    for n in SENDERS:
        for size in SIZES:
            pairs = [(s, 0) for s in range(8, 8 + n)]
            v = step_verdict(f, router, pairs, Routing.ECMP, cc=CongestionControl.DCQCN, flow_bytes=size)
            incast.append({"senders": n, "bytes": size, "slowdown": v.fabric_s / v.hose_s,
                           "max_queue_KB": v.max_queue_bytes / 1e3, "pfc_pause_us": v.pause_s * 1e6,
                           "ecn_marked": v.marked_fraction})
            print(f"incast {n:>2} x {size / 1e6:>5.0f} MB: {v.fabric_s / v.hose_s:.3f}x ideal, queue "
                  f"{v.max_queue_bytes / 1e3:.0f} KB, PFC pause {v.pause_s * 1e6:.0f} us, marked {v.marked_fraction:.3f}")
    big = fabric_for_cluster(get_cluster("dgx-h100", 1024))
    brouter = Router(big)
    a2a = pattern(big, siblings(tuple(range(64)), 1024), Collective.ALL_TO_ALL)
    ring = pattern(big, siblings(tuple(range(0, 1024, 8)), 1024), Collective.ALL_REDUCE)
    out: dict = {"incast": incast}
    for name, pairs, nbytes in (("ep64_all_to_all", a2a, 4e6), ("rail_ring_all_reduce", ring, 8e6)):
        row = {}
        for cc in CongestionControl:
            t0 = time.perf_counter()
            v = step_verdict(big, brouter, pairs, Routing.ECMP, cc=cc, flow_bytes=nbytes)
            row[cc.value] = {"nic_share": v.factor, "wall_s": time.perf_counter() - t0,
                             "max_queue_KB": v.max_queue_bytes / 1e3}
        row["flows"] = len(pairs)
        out[name] = row
        print(f"{name} ({len(pairs)} flows, {nbytes / 1e6:.0f} MB each, ECMP): NIC share ideal "
              f"{row['none']['nic_share']:.3f}, DCQCN {row['dcqcn']['nic_share']:.3f} "
              f"({row['dcqcn']['wall_s']:.1f} s)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fabric"))
    from test_dcqcn_ns3 import CASES, _slowdown

    errs = [100 * (_slowdown(v, n, size) / ref - 1) for v, n, size, ref in CASES]
    out["ns3"] = {"runs": len(errs), "mean_abs_error_pct": sum(abs(e) for e in errs) / len(errs),
                  "max_abs_error_pct": max(abs(e) for e in errs),
                  "ns3_slowdown_min": min(r for *_, r in CASES), "ns3_slowdown_max": max(r for *_, r in CASES)}
    print(f"vs ns-3: {len(errs)} incast runs, slowdown error mean {out['ns3']['mean_abs_error_pct']:.1f}%, max "
          f"{out['ns3']['max_abs_error_pct']:.1f}%")
    save("dcqcn_incast", out)


if __name__ == "__main__":
    main()
