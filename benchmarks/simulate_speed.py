"""Speed of `distscope simulate`.

Figures (last line: one JSON object):
* allreduce_1024_ring_64MiB: the 1024-NPU 64 MiB all-reduce on a 1-D ring (ASTRA-sim config of
  ../shared/validation/astra_sim, 1024 NPUs), traces from `chakra_generator`; wall time of the symmetric
  path (compile + simulate) and, separately, of reading the 1024 ET files and of the full per-rank path.
  ASTRA-sim takes about 10 s here (README: 8-11 s on 2 cores).

Usage: python benchmarks/simulate_speed.py [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from distscope.sim.api import run_traces
from distscope.sim.astra_config import read_network, read_system
from distscope.sim.network import AstraNetwork, NetworkMode
from distscope.sim.result import summarize
from distscope.trace.chakra_io import read_traces

ASTRA = Path("/work/shared/validation/astra_sim")
ASTRA_WALL_S = 10.0


def _best(fn, repeat: int = 3):  # type: ignore[no-untyped-def]
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def allreduce_1024(tmp: Path) -> dict[str, float]:
    npus, size = 1024, 64 << 20
    subprocess.run(
        ["chakra_generator", "--num_npus", str(npus), "--default_comm_size", str(size)],
        cwd=tmp,
        check=True,
        capture_output=True,
        timeout=600,
    )
    net_path = tmp / "net_1d_Ring_1024.yml"
    net_path.write_text(
        (ASTRA / "net_1d_Ring_64.yml")
        .read_text()
        .replace("[ 64 ]", f"[ {npus} ]")
        .replace("total 64", f"total {npus}")
    )
    net = read_network(net_path)
    system = read_system(ASTRA / "sys_ring_1d.json", 1)
    model = AstraNetwork(net, system, NetworkMode.UNAWARE)
    read_s, traces = _best(lambda: read_traces(tmp / "ALL_REDUCE"), repeat=1)
    sym_s, sym = _best(lambda: run_traces(traces, model, symmetric=True))
    full_s, full = _best(lambda: run_traces(traces, model, symmetric=False), repeat=1)
    rs, rf = summarize(sym), summarize(full)
    assert rs.step_time_s == rf.step_time_s
    return {
        "finish_ns": rs.step_time_s * 1e9,
        "symmetric_wall_s": sym_s,
        "read_1024_et_wall_s": read_s,
        "symmetric_plus_read_wall_s": sym_s + read_s,
        "full_per_rank_wall_s": full_s,
        "simulated_ranks": rs.simulated_ranks,
        "speedup_vs_astra_sim": ASTRA_WALL_S / sym_s,
        "speedup_vs_astra_sim_incl_read": ASTRA_WALL_S / (sym_s + read_s),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json-out", type=Path, default=None, help="Also write the JSON figures here.")
    args = ap.parse_args()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        figures["allreduce_1024_ring_64MiB"] = allreduce_1024(Path(d))
    print(f"{'figure':<28} {'key':<32} {'value':>14}")
    for name, vals in figures.items():
        assert isinstance(vals, dict)
        for k, v in vals.items():
            print(f"{name:<28} {k:<32} {v:>14.6g}")
    line = json.dumps(figures)
    if args.json_out:
        args.json_out.write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
