"""`distscope fabric`: a fabric's shape, and what one collective's traffic does on it per routing policy."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import numpy as np
import typer

from distscope.comm import collective_s, group_net
from distscope.comm.collective import Collective
from distscope.errors import DistscopeError, closest
from distscope.fabric.build import resolve
from distscope.fabric.collective import pattern, siblings, step_verdict
from distscope.fabric.dcqcn import congestion_controls
from distscope.fabric.network import MAX_ROUTES, scaled_cluster
from distscope.fabric.routing import Router, Routing, policies
from distscope.fabric.spec import Fabric, Plane
from distscope.report.progress import progress
from distscope.system.topology import Cluster

app = typer.Typer(help="Fabrics (switches, links, routing): `show` one, price a collective's traffic on it.",
                  no_args_is_help=True)

OPS = {c.value.replace("_", "-"): c for c in (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
                                               Collective.ALL_TO_ALL)}

FCT_MAX_FLOWS = 20_000
FabricOpt = Annotated[str | None, typer.Option("--fabric", help="Fabric YAML (see the README); default: the "
                                                "--cluster preset's rail-optimized two-tier Clos.")]
ClusterOpt = Annotated[str, typer.Option("--cluster", "-c", help="Cluster preset: device, scale-up level, NIC bandwidth.")]
GpusOpt = Annotated[int | None, typer.Option("--gpus", "-n", help="GPUs (default: the fabric's, or the preset's).")]
CcOpt = Annotated[str, typer.Option("--cc", help="Comma list of congestion controls: none (max-min fair rates, the "
                                    "ideal) and dcqcn (RoCE's DCQCN: each flow's rate state machine on fluid queues).")]


def describe(f: Fabric) -> dict[str, Any]:
    out_links = [ln for ln in f.links if ln.plane is Plane.OUT]
    switches = len(f.names) - f.gpus
    nic = sorted({round(f.nic_Bps(g) / 1e9, 3) for g in range(f.gpus)})
    return {"name": f.name, "gpus": f.gpus, "scale_up_domain": f.domain, "domains": f.domains, "switches": switches,
            "links": len(f.links), "scale_out_links": len(out_links), "nic_GBps": nic}


@app.command("show")
def show_cmd(fabric: FabricOpt = None, cluster: ClusterOpt = "dgx-h100", gpus: GpusOpt = None,
             as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False) -> None:
    """Check a fabric (every GPU connected, every link with bandwidth) and print its shape."""
    f, _ = resolve(fabric, cluster, gpus)
    d = describe(f)
    print(json.dumps(d) if as_json else "\n".join(f"{k:>16}: {v}" for k, v in d.items()))


def parse_ranks(text: str | None, world: int) -> tuple[int, ...]:
    """START:STOP[:STRIDE] (python range), or a comma list; default every rank."""
    if not text:
        return tuple(range(world))
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            ranks = tuple(range(*parts))
        else:
            ranks = tuple(int(p) for p in text.split(","))
    except (ValueError, TypeError):
        raise DistscopeError(f"--ranks {text!r}: expected START:STOP[:STRIDE] or a comma list of ranks") from None
    bad = [r for r in ranks if not 0 <= r < world]
    if len(ranks) < 2 or bad or len(set(ranks)) != len(ranks):
        raise DistscopeError(f"--ranks {text!r}: need at least 2 distinct ranks in 0..{world - 1}"
                             + (f" (rank {bad[0]} is outside)" if bad else ""))
    return ranks


@app.command("collective")
def collective_cmd(
    op: Annotated[str, typer.Option("--op", help=f"Collective: {', '.join(OPS)}.")] = "all-reduce",
    size: Annotated[float, typer.Option("--bytes", help="Message size D in bytes (nccl-tests convention).")] = 2**30,
    ranks: Annotated[str | None, typer.Option("--ranks", help="The group, START:STOP[:STRIDE] or a comma list; every "
                                              "group of its shape runs at once (default: all ranks).")] = None,
    routing: Annotated[str, typer.Option("--routing", help="Comma list of ecmp, spray, adaptive, valiant (per-packet detour through a random switch).")] = "ecmp,spray,adaptive",
    qps: Annotated[int, typer.Option("--qps", help="Queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION): "
                                     "sub-flows ECMP hashes apart.")] = 1,
    seeds: Annotated[int, typer.Option("--seeds", help="ECMP hash seeds to draw (the spread of collisions).")] = 1,
    fct: Annotated[bool, typer.Option("--fct", help="Also run the fluid model to every flow's completion.")] = False,
    cc: CcOpt = "none",
    fabric: FabricOpt = None, cluster: ClusterOpt = "dgx-h100", gpus: GpusOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """One collective's scale-out step on the fabric, per routing policy and congestion control: the share
    of NIC bandwidth it gets (vs a non-blocking fabric), the collective's time and busbw at that share, the
    hottest links."""
    coll = OPS.get(op.strip().lower())
    if coll is None:
        raise DistscopeError(f"--op {op!r} is not a collective{closest(op, OPS)}; choose from {', '.join(OPS)}")
    if qps < 1 or seeds < 1 or not 0 < size < math.inf:
        raise DistscopeError(f"--qps {qps} --seeds {seeds} --bytes {size:g}: need qps >= 1, seeds >= 1, finite bytes > 0")
    f, c = resolve(fabric, cluster, gpus)
    group = parse_ranks(ranks, f.gpus)
    pols = policies(routing)
    ccs = congestion_controls(cc)
    # bound the work before building the pattern: a step has at most world flows per ring collective and
    # world x group-size flows per all-to-all, each routed qps times per seed and policy
    upper = f.gpus * (len(group) if coll is Collective.ALL_TO_ALL else 1) * qps * seeds * len(pols) * len(ccs)
    if upper > MAX_ROUTES:
        raise DistscopeError(f"--ranks ({len(group)} ranks of {f.gpus}) x --qps {qps} x --seeds {seeds} x "
                             f"--routing ({len(pols)}) x --cc ({len(ccs)}) asks for up to {upper:,} routes; the limit is {MAX_ROUTES:,} "
                             "(about 20 s): narrow one")
    pairs = pattern(f, siblings(group, f.gpus), coll)
    if fct and len(pairs) * qps > FCT_MAX_FLOWS:
        raise DistscopeError(f"--fct with {len(pairs) * qps} flows: the fluid run takes one event per distinct finish "
                             f"time (minutes past {FCT_MAX_FLOWS}); narrow --ranks or drop --fct")
    router = Router(f)
    rows = []
    flow_bytes = size / len(group)  # a ring step's message, an all-to-all pair's share
    with progress(len(pols) * len(ccs) * seeds, f"routing {len(pairs) * qps} flows") as advance:
        for pol in pols:
            for control in ccs:
                vs = []
                per_packet = pol in (Routing.SPRAY, Routing.VALIANT)  # no hash: one seed says it all
                for s in range(1 if per_packet else seeds):
                    vs.append(step_verdict(f, router, pairs, pol, qps=qps, seed=s, fct=fct, cc=control,
                                           flow_bytes=flow_bytes))
                    advance()
                if per_packet:
                    advance(seeds - 1)
                rows.append(_row(f, c, coll, size, group, pol, vs))
    if as_json:
        print(json.dumps({"fabric": describe(f), "op": op, "bytes": size, "group_size": len(group),
                          "flows_per_step": len(pairs) * qps, "qps": qps, "results": rows}))
        return
    print(f"{op} of {size:.4g} B over {len(group)} ranks on {f.name} ({len(pairs) * qps} scale-out flows per step, "
          f"{qps} QP/connection)")
    print(f"{'routing':>9} {'cc':>6} {'NIC share':>10} {'(worst seed)':>12} {'time s':>10} {'busbw GB/s':>11} "
          f"{'max queue KB':>12}  hottest link")
    for r in rows:
        hot = _hottest(r)
        print(f"{r['routing']:>9} {r['cc']:>6} {r['nic_share']:>10.3f} {r['nic_share_min']:>12.3f} {r['time_s']:>10.4g} "
              f"{r['busbw_GBps']:>11.2f} {r['max_queue_bytes'] / 1e3:>12.0f}  {hot}")


def _row(f: Fabric, c: Cluster, coll: Collective, size: float, group: tuple[int, ...], pol: Routing,
         vs: list[Any]) -> dict[str, Any]:
    """One policy's verdict: the mean NIC share over seeds prices the collective on the cluster's levels
    with the scale-out bandwidth scaled by it (comm.collective_s: NCCL's algorithm choice)."""
    share = float(np.mean([v.factor for v in vs]))
    stride = group[1] - group[0] if len(set(np.diff(group))) == 1 else 1
    t = collective_s(coll, size, group_net(scaled_cluster(c, f, share, group[0]), len(group), stride))
    busbw = size / t * coll.busbw_factor(len(group)) / 1e9 if t > 0 else 0.0
    row: dict[str, Any] = {"routing": pol.value, "cc": vs[0].cc.value, "nic_share": share,
                           "nic_share_min": min(v.factor for v in vs), "seeds": len(vs), "time_s": t, "busbw_GBps": busbw,
                           "max_queue_bytes": max(v.max_queue_bytes for v in vs), "pause_s": max(v.pause_s for v in vs),
                           "hot": [list(h) for h in vs[0].hot]}
    if not np.isnan(vs[0].fct_s).all() and len(vs[0].fct_s):
        row["fct_over_hose"] = _percentiles(vs[0].fct_s / vs[0].hose_s)
    return row


def _percentiles(x: np.ndarray) -> dict[str, float]:
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)), "max": float(x.max())}


def _hottest(row: dict[str, Any]) -> str:
    """A result row's hottest link and its utilization, for the table."""
    return f"{row['hot'][0][0]} {row['hot'][0][1]:.0%}" if row["hot"] else "-"


@app.command("incast")
def incast_cmd(
    senders: Annotated[str, typer.Option("--senders", help="The senders, START:STOP[:STRIDE] or a comma list.")] = "8:40",
    to: Annotated[int, typer.Option("--to", help="The receiving GPU.")] = 0,
    size: Annotated[float, typer.Option("--bytes", help="Bytes each sender sends.")] = 16e6,
    routing: Annotated[str, typer.Option("--routing", help="One of ecmp, spray, adaptive.")] = "ecmp",
    cc: CcOpt = "none,dcqcn",
    fabric: FabricOpt = None, cluster: ClusterOpt = "dgx-h100", gpus: GpusOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """N senders to one GPU at once: how each congestion control reacts (completion times against the
    ideal, the receiver's link, the deepest queue, PFC pauses, ECN marks)."""
    f, _ = resolve(fabric, cluster, gpus)
    src = parse_ranks(senders, f.gpus)
    if not 0 <= to < f.gpus or to in src:
        raise DistscopeError(f"--to {to}: need a GPU in 0..{f.gpus - 1} that is not among the --senders")
    if not 0 < size < math.inf:
        raise DistscopeError(f"--bytes {size:g}: need finite bytes > 0")
    pols = policies(routing)
    if len(pols) != 1:
        raise DistscopeError(f"--routing {routing!r}: give one policy")
    pairs = [(s, to) for s in src]
    router = Router(f)
    rows: list[dict[str, Any]] = []
    for control in congestion_controls(cc):
        v = step_verdict(f, router, pairs, pols[0], fct=True, cc=control, flow_bytes=size)
        rows.append({"cc": control.value, "time_s": v.fabric_s, "ideal_s": v.hose_s, "slowdown": v.fabric_s / v.hose_s,
                     "fct_over_ideal": _percentiles(v.fct_s / v.hose_s),
                     "max_queue_bytes": v.max_queue_bytes, "pause_s": v.pause_s, "marked_fraction": v.marked_fraction,
                     "hot": [list(h) for h in v.hot[:3]]})
    if as_json:
        print(json.dumps({"fabric": describe(f), "senders": len(src), "to": to, "bytes": size,
                          "routing": pols[0].value, "results": rows}))
        return
    print(f"incast: {len(src)} senders x {size:.4g} B to {f.names[to]} on {f.name} ({pols[0].value}); ideal "
          f"{rows[0]['ideal_s'] * 1e3:.4g} ms (the receiver's NIC)")
    print(f"{'cc':>6} {'time ms':>9} {'x ideal':>8} {'FCT p50':>8} {'p99':>6} {'max queue KB':>12} {'PFC pause ms':>12} "
          f"{'ECN marked':>10}  hottest link")
    for r in rows:
        hot = _hottest(r)
        fc = r["fct_over_ideal"]
        print(f"{r['cc']:>6} {r['time_s'] * 1e3:>9.4g} {r['slowdown']:>8.3f} {fc['p50']:>8.3f} {fc['p99']:>6.3f} "
              f"{r['max_queue_bytes'] / 1e3:>12.0f} {r['pause_s'] * 1e3:>12.3g} {r['marked_fraction']:>10.3f}  {hot}")
