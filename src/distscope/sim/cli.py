"""`distscope simulate`: run Chakra execution traces on a network model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from distscope.errors import DistscopeError, closest

if TYPE_CHECKING:
    from distscope.measure.kernel_profile import KernelProfile
    from distscope.sim.program import Device
    from distscope.sim.result import SimResult

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
    target: Annotated[str, typer.Argument(help="Trace directory, or PREFIX of PREFIX.<rank>.et files.")],
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
        str | None,
        typer.Option("--profile", help="With --cluster: system profile JSON (measure calibrate/kernels): measured α/β "
                     "replace the preset's links; kernel tables price compute nodes that carry no duration."),
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    timeline: Annotated[
        Path | None,
        typer.Option("--timeline", help="Write a Chrome/Perfetto trace (one process per rank, compute/comm tracks)."),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")
    ] = None,
) -> None:
    """Simulate a training step (or microbenchmark) from per-rank Chakra traces."""
    from distscope.dtypes import DType
    from distscope.report.cli import check_report
    from distscope.sim.api import run_traces
    from distscope.sim.astra_config import read_network, read_system
    from distscope.sim.network import AstraNetwork, NetworkMode, NetworkModel
    from distscope.sim.program import Device
    from distscope.sim.result import summarize, write_timeline
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
    model: NetworkModel
    if cluster is not None:
        if network is not None or system is not None:
            raise DistscopeError("give either --cluster/--gpus or --network/--system, not both")
        if gpus is None:
            raise DistscopeError(f"--cluster={cluster!r} needs --gpus")
        from distscope.scenario import build_cluster
        from distscope.sim.cluster_network import ClusterNetwork

        c = build_cluster(cluster, gpus, link, profile)
        model = ClusterNetwork(c)
        device = Device(peak_flops=c.device.flops(DType.BF16), mem_bw_Bps=c.device.hbm_Bps)
        if c.device.kernels is not None:
            device = _measured_device(c.device.kernels, device)
        where = f"cluster {cluster!r} x{gpus}"
        npus = c.num_gpus
    else:
        if profile is not None:
            raise DistscopeError("--profile applies to --cluster; ASTRA-sim --network/--system carry their own numbers")
        if network is None or system is None:
            raise DistscopeError("simulate needs --network NET.yml and --system SYS.json, or --cluster NAME --gpus N")
        net = read_network(network)
        sysc = read_system(system, len(net.dims))
        model = AstraNetwork(net, sysc, mode)
        device = Device(peak_flops=sysc.peak_perf_flops, mem_bw_Bps=sysc.local_mem_bw_Bps)
        where = f"network {str(network)!r}"
        npus = net.num_npus
    from distscope.report.progress import progress

    symmetric_dir = Path(target, MANIFEST).is_file()
    prefix = None if symmetric_dir else _resolve_prefix(target)
    if prefix is not None:  # a rank-count mismatch is known before any file is read
        from distscope.trace.chakra_io import trace_files

        files = len(trace_files(prefix))
        if files != npus:
            raise DistscopeError(f"traces {target!r} have {files} ranks but {where} has {npus}")
    else:
        from distscope.userfile import read_json

        manifest = read_json(Path(target, MANIFEST), "manifest")
        if isinstance(manifest.get("num_ranks"), int) and manifest["num_ranks"] != npus:
            raise DistscopeError(f"traces {target!r} have {manifest['num_ranks']} ranks but {where} has {npus}")
        reps = manifest.get("representatives")
        files = len(reps) if isinstance(reps, list) else 0  # one file per representative rank
    with progress(files or None, "reading traces") as advance:
        traces = read_symmetric(target, on_rank=advance) if prefix is None else read_traces(prefix, on_rank=advance)
    if traces.num_ranks != npus:
        raise DistscopeError(f"traces {target!r} have {traces.num_ranks} ranks but {where} has {npus}")
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
    if as_json:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
        return
    _print_table(result)



def _measured_device(kp: KernelProfile, device: Device) -> Device:
    """Compute nodes that carry only FLOPs and bytes run at the profile's best measured bf16 GEMM
    throughput and element-wise bandwidth (traces from `trace generate --profile` carry durations)."""
    import dataclasses

    from distscope.dtypes import DType

    peak = kp.gemm[DType.BF16].max_value * 1e12 if DType.BF16 in kp.gemm else device.peak_flops
    bw = kp.elementwise.max_value * 1e9 if kp.elementwise is not None else device.mem_bw_Bps
    return dataclasses.replace(device, peak_flops=peak, mem_bw_Bps=bw)


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
