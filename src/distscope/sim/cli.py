"""`distscope simulate`: run Chakra execution traces on a network model."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from distscope.errors import DistscopeError, closest

if TYPE_CHECKING:
    from distscope.fabric.network import FabricChoice, FabricNetwork
    from distscope.measure.kernel_profile import KernelProfile
    from distscope.sim.network import NetworkMode, NetworkModel
    from distscope.sim.program import Device
    from distscope.sim.result import SimResult
    from distscope.system.topology import Cluster
    from distscope.trace.traceset import TraceSet

MODES = ("unaware", "shared")
STREAMS = ("per-group", "single")


def _resolve_prefix(target: str) -> str:
    from distscope.trace.chakra_io import prefixes_in

    path = Path(target)
    if path.is_dir():
        found = prefixes_in(path)
        if not found:
            raise DistscopeError(f"trace directory {target!r}: no PREFIX.<rank>.et files")
        if len(found) > 1:
            raise DistscopeError(
                f"trace directory {target!r} holds several traces ({', '.join(found[:6])}); pass DIR/PREFIX"
            )
        return str(path / found[0])
    return target


def simulate(
    target: Annotated[str, typer.Argument(help="Trace directory (e.g. a capture), or PREFIX of PREFIX.<rank>.et files.")],
    network: Annotated[Path | None, typer.Option("--network", help="ASTRA-sim analytical network .yml.")] = None,
    system: Annotated[Path | None, typer.Option("--system", help="ASTRA-sim system .json.")] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", "-c", help="Cluster preset (see `distscope clusters`); needs --gpus.")
    ] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-n", help="GPUs of the --cluster preset.")] = None,
    link: Annotated[
        str | None, typer.Option("--link", help="With --cluster: level bandwidths in GB/s, e.g. nvlink=300,ib=25.")
    ] = None,
    profile: Annotated[
        Path | None,
        typer.Option("--profile", help="System profile JSON (`measure calibrate` / `measure kernels`). With --cluster: "
                     "measured α/β replace the preset's links and kernel tables price compute nodes without a "
                     "duration; alone (a capture): communication priced with the profile's α-β."),
    ] = None,
    profile_level: Annotated[
        str | None, typer.Option("--profile-level", help="Level of --profile to use (default: its only level).")
    ] = None,
    network_mode: Annotated[
        str,
        typer.Option(
            "--network-mode",
            help="unaware: each transfer priced alone (ASTRA-sim congestion-unaware); shared: concurrent "
            "transfers share a level's bandwidth, store-and-forward hops (like ASTRA-sim congestion-aware).",
        ),
    ] = "unaware",
    symmetry: Annotated[
        bool,
        typer.Option("--symmetry/--no-symmetry", help="Simulate one representative per class of equivalent ranks."),
    ] = True,
    comm_streams: Annotated[
        str,
        typer.Option(
            "--comm-streams",
            help="per-group: one collective stream per process group (NCCL); single: all collectives of a "
            "rank in one queue (ASTRA-sim's system layer).",
        ),
    ] = "per-group",
    scale_compute: Annotated[
        str | None, typer.Option("--scale-compute", help="What-if: compute takes F times as long: F or F@RANK,RANK.")
    ] = None,
    delay_ms: Annotated[
        str | None, typer.Option("--delay-ms", help="What-if: ranks start their step late: RANK=MS[,RANK=MS].")
    ] = None,
    scale_bw: Annotated[
        str | None, typer.Option("--scale-bw", help="What-if: a level's bandwidth times F: LEVEL=F[,LEVEL=F].")
    ] = None,
    scale_latency: Annotated[
        str | None, typer.Option("--scale-latency", help="What-if: a level's latency times F: LEVEL=F[,...].")
    ] = None,
    algorithm: Annotated[
        str | None, typer.Option("--algorithm", help="What-if: force an algorithm: COLLECTIVE=ALGO, e.g. all_reduce=tree.")
    ] = None,
    compress: Annotated[
        str | None,
        typer.Option("--compress", help="What-if: compress a group's collectives: GROUP=METHOD, e.g. dp=bf16."),
    ] = None,
    no_comm: Annotated[
        str | None, typer.Option("--no-comm", help="What-if: a group's communication takes no time: GROUP[,GROUP].")
    ] = None,
    place: Annotated[
        str | None, typer.Option("--place", help="With --cluster: the GPU of each trace rank, e.g. 0,8,16,24.")
    ] = None,
    dp: Annotated[
        int | None,
        typer.Option("--dp", help="A capture at another data-parallel degree: DP groups grow to N (replicas of the "
                     "captured ranks), TP/PP groups keep their size. Price it with --cluster/--gpus or --profile."),
    ] = None,
    fabric: Annotated[
        str | None,
        typer.Option("--fabric", help="With --cluster: price the scale-out on a fabric (switches, links, routing): a "
                                      "fabric YAML, or 'preset' for the cluster's rail-optimized Clos."),
    ] = None,
    routing: Annotated[str, typer.Option("--routing", help="With --fabric: ecmp, spray or adaptive.")] = "ecmp",
    seed: Annotated[int, typer.Option("--seed", help="With --fabric: the ECMP hash seed.")] = 0,
    cc: Annotated[str, typer.Option("--cc", help="With --fabric: congestion control, none (max-min fair rates) or "
                                    "dcqcn (RoCE's: each flow's rate state machine on fluid queues).")] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    timeline: Annotated[
        Path | None,
        typer.Option("--timeline", help="Write a Chrome/Perfetto trace (one process per rank, compute/comm tracks)."),
    ] = None,
    report: Annotated[
        str | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")
    ] = None,
) -> None:
    """Simulate a training step (or microbenchmark) from per-rank Chakra traces, optionally with what-ifs."""
    from distscope.report.cli import check_report
    from distscope.report.progress import progress
    from distscope.sim import whatif as W
    from distscope.sim.api import run_traces
    from distscope.sim.network import NetworkMode
    from distscope.sim.result import comm_bytes_by_group, summarize, write_timeline
    from distscope.trace.chakra_io import MANIFEST, read_symmetric, read_traces

    check_report(report)
    if network_mode not in MODES:
        raise DistscopeError(
            f"--network-mode={network_mode!r} is not one of {list(MODES)}{closest(network_mode, MODES)}"
        )
    mode = NetworkMode(network_mode)
    if comm_streams not in STREAMS:
        raise DistscopeError(
            f"--comm-streams={comm_streams!r} is not one of {list(STREAMS)}{closest(comm_streams, STREAMS)}"
        )
    factor, ranks = W.parse_scale_compute(scale_compute) if scale_compute else (1.0, None)
    whatif = W.WhatIf(
        compute_scale=factor,
        compute_ranks=ranks,
        delay_s=W.parse_delays(delay_ms) if delay_ms else {},
        algorithms=W.parse_algorithms(algorithm) if algorithm else {},
        compress=W.parse_compress(compress) if compress else {},
        no_comm=W.parse_groups(no_comm) if no_comm else frozenset(),
        placement=W.parse_placement(place) if place else None,
    )
    bw = W.parse_level_scales(scale_bw, "--scale-bw") if scale_bw else {}
    lat = W.parse_level_scales(scale_latency, "--scale-latency") if scale_latency else {}
    if fabric is not None and cluster is None:  # before the network: its own checks would name another flag
        raise DistscopeError(FABRIC_NEEDS_CLUSTER)
    model, device, codec = _network(network, system, cluster, gpus, link, profile, profile_level, mode, bw, lat,
                                    whatif.placement)
    fabric_net = None
    if fabric is not None and cluster is not None:
        from distscope.fabric.network import fabric_choice

        fabric_net = _on_fabric(model, fabric_choice(fabric, routing, seed, cluster, gpus, cc))
    model = fabric_net or model
    where = f"network {str(network)!r}" if network is not None else (
        f"cluster {cluster!r} x{gpus}" if cluster is not None else f"profile {str(profile)!r}")

    def rank_check(n: int) -> None:  # fewer ranks than GPUs is fine on a cluster (--place), not on ASTRA-sim's
        if n > model.num_npus or (network is not None and n != model.num_npus):
            raise DistscopeError(f"traces {target!r} have {n} ranks but {where} has {model.num_npus}")

    symmetric_dir = Path(target, MANIFEST).is_file()
    prefix = None if symmetric_dir else _resolve_prefix(target)
    if prefix is not None:  # a rank-count mismatch is known before any file is read
        from distscope.trace.chakra_io import trace_files

        files = len(trace_files(prefix))
        if dp is None:
            rank_check(files)
    else:
        from distscope.userfile import read_json

        manifest = read_json(Path(target, MANIFEST), "manifest")
        if isinstance(manifest.get("num_ranks"), int):
            rank_check(manifest["num_ranks"])
        reps = manifest.get("representatives")
        files = len(reps) if isinstance(reps, list) else 0  # one file per representative rank
    with progress(files or None, "reading traces") as advance:
        traces = read_symmetric(target, on_rank=advance) if prefix is None else read_traces(prefix, on_rank=advance)
    captured_dp = None
    if dp is not None:
        from distscope.trace.scale import scale_dp

        if prefix is None:
            raise DistscopeError("--dp applies to a capture (one trace per rank), not to a symmetric trace set")
        traces, captured_dp = scale_dp(traces, dp)
        if traces.num_ranks > model.num_npus:
            raise DistscopeError(f"--dp={dp}: the job needs {traces.num_ranks} ranks but {where} has "
                                 f"{model.num_npus}; give --gpus {traces.num_ranks} or more")
    rank_check(traces.num_ranks)
    W.check_groups(whatif, traces)
    from distscope.sim.profile_network import ProfileNetwork

    if isinstance(model, ProfileNetwork) and model.profile.by_dtype:  # each group at its payload's measured α-β
        model = model.with_group_dtypes(traces.group_dtypes())
    if whatif.changes_network:
        whatif = dataclasses.replace(whatif, codec_GBps=codec)
        model = W.WhatIfNetwork(model, whatif, traces)
    capture = _capture_summary(target) if captured_dp is None else None  # scaled: not the captured job
    delays = dict(whatif.delay_s)
    for r, v in (capture or {}).get("start_offset_s_by_rank", {}).items():  # one host's clock: ranks started apart
        if float(v) > 0:
            delays[int(r)] = delays.get(int(r), 0.0) + float(v)
    traces = W.apply_to_traces(traces, dataclasses.replace(whatif, delay_s=delays))
    with progress(None, f"matching collectives of {traces.num_ranks:,} ranks") as bar:
        def simulated(done: int, total: int) -> None:  # called every 32k events once the simulation runs
            bar.describe("simulating (nodes done)")
            bar.update(done, total)

        outcome = run_traces(
            traces,
            model,
            mode=mode,
            symmetric=symmetry,
            device=device,
            single_comm_stream=comm_streams == "single",
            progress=simulated,
        )
    result = summarize(outcome)
    if timeline is not None:
        write_timeline(outcome, timeline)
    if report is not None:
        from distscope.report.cli import write_report
        from distscope.report.step_view import comm_bytes_per_group, timeline_rows

        write_report({**result.to_json(), "kind": "simulate", "step_view": {
            "timeline": timeline_rows(outcome), "comm_bytes_per_group": comm_bytes_per_group(traces),
            "simulated_step_s": result.step_time_s}}, report)
    measured, profiled = _measured_steps(capture, target)
    unprofiled = capture is not None and capture.get("unprofiled_step_s") is not None
    skew = _skew_by_rank(traces) if measured is not None else {}
    if as_json:
        out = result.to_json()
        out["comm_bytes"] = comm_bytes_by_group(traces)
        if captured_dp is not None:
            out["scaled"] = {"captured_dp": captured_dp, "dp": dp, "ranks": traces.num_ranks}
        if fabric_net is not None:
            out["fabric"] = _fabric_json(fabric_net)
        if measured is not None:
            out["measured_step_s"] = measured
            out["profiled_step_s"] = profiled
            out["measured_is"] = "unprofiled" if unprofiled else "profiled"
            out["completion_skew_s_by_rank"] = skew
        sys.stdout.write(json.dumps(out) + "\n")
        return
    _print_table(result)
    if fabric_net is not None:
        _print_fabric(fabric_net)
    if captured_dp is not None:
        print(f"the capture scaled from data-parallel degree {captured_dp} to {dp} ({traces.num_ranks} ranks; "
              "each captured rank's compute replayed, DP collectives priced on the larger groups)")
    if measured is not None and profiled is not None:
        from rich.console import Console

        def err(m: float) -> str:
            return f"{(result.step_time_s - m) / m * 100:+.1f}%"

        if unprofiled:
            Console().print(f"measured step (the job's own, unprofiled): {measured * 1e3:.3f} ms; predicted "
                            f"{err(measured)}; the profiled step was {profiled * 1e3:.3f} ms ({err(profiled)})")
        else:
            Console().print(f"measured step (profiled capture): {measured * 1e3:.3f} ms; predicted {err(measured)}")
        if any(skew.values()):
            worst = max(skew, key=lambda r: skew[r])
            Console().print(f"host completion skew replayed from the comm logs: {skew[worst] * 1e3:.1f} ms (rank {worst})")


FABRIC_NEEDS_CLUSTER = "--fabric lays a --cluster preset's scale-out onto a fabric: give --cluster and --gpus"


def _on_fabric(model: NetworkModel, choice: FabricChoice) -> FabricNetwork:
    """The --cluster network with its scale-out on the fabric (fabric/network.py)."""
    from distscope.fabric.network import FabricNetwork
    from distscope.sim.cluster_network import ClusterNetwork

    if not isinstance(model, ClusterNetwork):  # --cluster always gives one
        raise DistscopeError(FABRIC_NEEDS_CLUSTER)
    return FabricNetwork(model.cluster, choice)


def _fabric_json(net: FabricNetwork) -> dict[str, Any]:
    c = net.choice
    return {"name": c.fabric.name, "routing": c.routing.value, "seed": c.seed, "cc": c.cc.value,
            "traffic": [dataclasses.asdict(v) for v in net.verdicts]}


def _print_fabric(net: FabricNetwork) -> None:
    """Which traffic lost bandwidth on the fabric, and where."""
    from distscope.fabric.network import verdict_line

    c = net.choice
    worst = net.worst()
    print(f"fabric {c.fabric.name} ({c.routing.value}, seed {c.seed}, cc {c.cc.value}): {len(net.verdicts)} scale-out traffic shapes, "
          f"{len(worst)} below full NIC bandwidth")
    for v in worst:
        print(f"  {verdict_line(v)}")


def _measured_steps(capture: dict[str, Any] | None, target: str) -> tuple[float | None, float | None]:
    """(the step to compare with, the profiled step) of a capture: the job's own unprofiled step where
    the capture timed one, else (an older capture) the profiled step, with a one-line warning."""
    if capture is None:
        return None, None
    profiled = float(capture["step_s"])
    unprofiled = capture.get("unprofiled_step_s")
    if unprofiled is None:
        print(f"distscope: warning: capture {target!r} has no steps timed without the profiler (steps.<rank>.json); "
              "compared with the profiled step. Recapture with `distscope trace capture --timed-steps 3 ...` "
              "for the job's own step", file=sys.stderr)
        return profiled, profiled
    return float(unprofiled), profiled


def _skew_by_rank(traces: TraceSet) -> dict[int, float]:
    """Seconds of '(completion skew)' nodes (trace/from_capture.py) per rank of a captured trace set."""
    from distscope.trace.from_capture import SKEW_NAME

    return {r: sum(n.duration_s for n in g.nodes if n.name == SKEW_NAME) for r, g in traces.graphs.items()}


def _capture_summary(target: str) -> dict[str, Any] | None:
    """The summary (capture.json) of a capture folder, if the target is one."""
    from distscope.trace.capture_files import SUMMARY, load_summary

    path = Path(target)
    if not (path.is_dir() and (path / SUMMARY).is_file()):
        return None
    return load_summary(path)


def _network(
    network: Path | None,
    system: Path | None,
    cluster: str | None,
    gpus: int | None,
    link: str | None,
    profile: Path | None,
    profile_level: str | None,
    mode: NetworkMode,
    bw: dict[str, float],
    lat: dict[str, float],
    placement: tuple[int, ...] | None,
) -> tuple[NetworkModel, Device, tuple[float, float] | None]:
    """The network model, the device for nodes without durations, and compression codec throughputs
    (None: a CPU core's, by method)."""
    from distscope.compress.spec import GPU_DEQUANT_GBps, GPU_QUANT_GBps
    from distscope.dtypes import DType
    from distscope.sim.astra_config import read_network, read_system
    from distscope.sim.network import AstraNetwork
    from distscope.sim.program import Device

    given = [name for name, v in (("--cluster", cluster), ("--profile", None if cluster else profile),
                                  ("--network", network)) if v]
    if len(given) > 1:
        raise DistscopeError(f"give one of --cluster/--gpus, --profile, --network/--system (got {', '.join(given)})")
    if placement is not None and cluster is None:
        raise DistscopeError("--place maps ranks onto a --cluster preset; give --cluster and --gpus")
    if cluster is not None:
        if gpus is None:
            raise DistscopeError(f"--cluster={cluster!r} needs --gpus")
        from distscope.scenario import SystemFlags, build_cluster
        from distscope.sim.cluster_network import ClusterNetwork

        c = _scale_cluster(build_cluster(SystemFlags(cluster=cluster, gpus=gpus, link=link, profile=str(profile) if profile else None)), bw, lat)
        device = Device(peak_flops=c.device.flops(DType.BF16), mem_bw_Bps=c.device.hbm_Bps)
        if c.device.kernels is not None:
            device = _measured_device(c.device.kernels, device)
        return ClusterNetwork(c), device, (GPU_QUANT_GBps, GPU_DEQUANT_GBps)
    if profile is not None:
        from distscope.measure.profile import load_profile
        from distscope.sim.profile_network import ProfileNetwork

        prof = load_profile(profile)
        net = ProfileNetwork(prof, level=profile_level)
        for flag, scales in (("--scale-bw", bw), ("--scale-latency", lat)):
            bad = [k for k in scales if k != net.level]
            if bad:
                raise DistscopeError(f"{flag}: level {bad[0]!r} is not the profile's level {net.level!r}")
        net = ProfileNetwork(prof, level=net.level, bw_scale=bw.get(net.level, 1.0),
                             latency_scale=lat.get(net.level, 1.0))
        return net, Device(), None  # a host's profile: one CPU core's codec rates, by method (compress/spec.py)
    if network is None or system is None:
        raise DistscopeError(
            "simulate needs --profile P.json, --cluster NAME --gpus N, or --network NET.yml --system SYS.json"
        )
    if bw or lat:
        raise DistscopeError("--scale-bw/--scale-latency apply to --cluster or --profile networks")
    net_cfg = read_network(network)
    sysc = read_system(system, len(net_cfg.dims))
    device = Device(peak_flops=sysc.peak_perf_flops, mem_bw_Bps=sysc.local_mem_bw_Bps)
    return AstraNetwork(net_cfg, sysc, mode), device, (GPU_QUANT_GBps, GPU_DEQUANT_GBps)


def _measured_device(kp: KernelProfile, device: Device) -> Device:
    """Compute nodes that carry only FLOPs and bytes run at the profile's best measured bf16 GEMM
    throughput and element-wise bandwidth (traces from `trace generate --profile` carry durations)."""
    from distscope.dtypes import DType

    peak = kp.gemm[DType.BF16].max_value * 1e12 if DType.BF16 in kp.gemm else device.peak_flops
    bw = kp.elementwise.max_value * 1e9 if kp.elementwise is not None else device.mem_bw_Bps
    return dataclasses.replace(device, peak_flops=peak, mem_bw_Bps=bw)


def _scale_cluster(c: Cluster, bw: dict[str, float], lat: dict[str, float]) -> Cluster:
    names = [lv.name for lv in c.levels]
    for flag, scales in (("--scale-bw", bw), ("--scale-latency", lat)):
        for k in scales:
            if k not in names:
                raise DistscopeError(f"{flag}: level {k!r} is not a level of {c.name}{closest(k, names)}; "
                                     f"levels: {', '.join(names)}")
    levels = tuple(
        dataclasses.replace(lv, bw_GBps=lv.bw_GBps * bw.get(lv.name, 1.0), latency_s=lv.latency_s * lat.get(lv.name, 1.0))
        for lv in c.levels
    )
    return dataclasses.replace(c, levels=levels)


def _print_table(result: SimResult) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"step time {result.step_time_s * 1e3:.6f} ms")
    for col in ("rank", "finish ms", "compute ms", "exposed comm ms"):
        table.add_column(col, justify="right")
    shown = result.ranks if len(result.ranks) <= 16 else result.ranks[:8] + result.ranks[-8:]
    for r in shown:
        table.add_row(
            str(r.rank),
            f"{r.finish_s * 1e3:.6f}",
            f"{r.compute_s * 1e3:.6f}",
            f"{r.exposed_comm_s * 1e3:.6f}",
        )
    Console().print(table)
    Console().print(
        f"{len(result.ranks)} ranks ({result.simulated_ranks} simulated), {result.events} events, "
        f"{result.wall_s:.3f} s wall"
    )
