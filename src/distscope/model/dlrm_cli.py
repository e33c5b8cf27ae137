"""`distscope estimate` and `distscope plan` of a recommendation model (`--model dlrm:tables.yaml` or
`dlrm:mlperf-dcnv2`): model/embedding_cost.py prices a sharding, search/embedding_plan.py chooses one."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from distscope import scenario as S

if TYPE_CHECKING:
    from distscope.compress.eb_codec import EmbCompression
    from distscope.model.embedding_cost import DlrmEstimate, Sharding
    from distscope.system.topology import Cluster
    from distscope.workload.embedding import DlrmSpec


def _checks(workload: S.WorkloadFlags, plan: S.PlanFlags, other: bool) -> None:
    """Flags a recommendation model does not take: one line each."""
    from distscope.errors import DistscopeError

    given = S.first_set_flag(plan, ("sharding", "compress"))
    if given is not None:
        raise DistscopeError(f"{given[0]}={given[1]}: a recommendation model is planned by its embedding "
                             "sharding (--sharding); its dense part is data-parallel over every GPU")
    if other:
        raise DistscopeError("--report, --comm-volume, --inference and --batches are for transformer models and torch "
                             "modules")
    if workload.input is not None or workload.seq is not None or workload.mtp_layers is not None:
        raise DistscopeError("--input, --seq and --mtp-layers do not apply to a recommendation model: its tables file "
                             "gives the shapes and --global-batch the samples per step")


def _compression(plan: S.PlanFlags, codec_gbps: float | None) -> EmbCompression | None:
    from distscope.compress.eb_codec import emb_compression
    from distscope.errors import DistscopeError

    if plan.compress is None:
        if codec_gbps is not None:
            raise DistscopeError("--quant-gbps is the codec's rate for --compress emb=CODEC:BOUND; give --compress too")
        return None
    return emb_compression(plan.compress, codec_gbps)


def shardings_for(spec: DlrmSpec, cluster: Cluster, sharding: str | None, global_batch: int,
                  compression: EmbCompression | None = None) -> tuple[Sharding, str]:
    """The sharding --sharding names (a type for every table, a file, HugeCTR's hier_auto plan with its
    arguments or its hybrid embedding), else the planner's choice; the published-run rows
    (validate/dlrm_rows.py) name theirs the same way."""
    from distscope.model import hybrid_embedding
    from distscope.model.embedding_cost import ShardingType
    from distscope.search import hugectr_plan
    from distscope.search.embedding_plan import place, plan_embeddings, uniform
    from distscope.search.sharding_file import load_sharding

    if sharding is None:
        found = plan_embeddings(spec, cluster, global_batch=global_batch, compression=compression)
        return found.shardings, "the planner's choice"
    if sharding.endswith((".yaml", ".yml")):
        return load_sharding(sharding, spec, cluster), sharding
    if sharding.startswith(hybrid_embedding.PREFIX):
        hybrid = hybrid_embedding.HybridEmbedding.parse(sharding)  # checked against the tables when priced
        return hybrid, f"HugeCTR's hybrid embedding ({hybrid.frequent:,} frequent categories, {hybrid.infrequent:,.0f} " \
            "infrequent lookups per batch)"
    if sharding.startswith("hugectr:"):
        config = hugectr_plan.HierAutoConfig.parse(sharding)
        return hugectr_plan.plan_hier_auto(spec, cluster, config), f"HugeCTR's hier_auto plan ({sharding})"
    kind = ShardingType.parse(sharding, "--sharding")
    return place(spec, cluster, uniform(spec, cluster, kind), global_batch=global_batch), f"every table {kind.value}"


@dataclasses.dataclass(frozen=True)
class _Scenario:
    """The flags of `estimate` and `trace generate` made into a priced sharding, once for both."""

    spec: DlrmSpec
    cluster: Cluster
    global_batch: int
    compression: EmbCompression | None
    shardings: Sharding
    source: str  # where the sharding came from


def _scenario(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, codec_gbps: float | None,
              other: bool) -> _Scenario:
    from distscope.model.embedding_cost import check_batch
    from distscope.workload.embedding import load_dlrm

    _checks(workload, plan, other)
    spec = load_dlrm(workload.model)
    cluster = S.build_cluster(system)
    gb = workload.global_batch
    check_batch(gb, cluster.num_gpus)
    comp = _compression(plan, codec_gbps)
    shardings, source = shardings_for(spec, cluster, plan.sharding, gb, comp)
    return _Scenario(spec=spec, cluster=cluster, global_batch=gb, compression=comp, shardings=shardings, source=source)


def dlrm_step_traces(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags) -> tuple[Any, dict[str, Any]]:
    """`trace generate --model dlrm:...`: every rank's trace of the step `estimate` prices for the same flags
    (trace/from_dlrm.py), and the plan fields it was built from."""
    from distscope.model.embedding_cost import sharding_counts
    from distscope.trace.from_dlrm import dlrm_traces

    sc = _scenario(workload, system, plan, codec_gbps=None, other=False)
    traces = dlrm_traces(sc.spec, sc.cluster, sc.shardings, global_batch=sc.global_batch, compression=sc.compression)
    return traces, {"sharding": sc.source, "sharding_types": sharding_counts(sc.shardings),
                    "compression": None if sc.compression is None else sc.compression.label}


def _summary(spec: DlrmSpec, cluster: Cluster, shardings: Sharding, est: DlrmEstimate) -> str:
    gib = 2**30
    look = est.rank_lookup_s
    mean = sum(look) / len(look)
    return (f"step {est.step_time_s * 1e3:.3f} ms, {est.samples_per_s:,.0f} samples/s; lookups per rank: max "
            f"{max(look) * 1e3:.3f} ms, {max(look) / mean if mean else 1.0:.2f}x the mean; memory per GPU "
            f"{min(est.rank_memory_bytes) / gib:.1f}-{max(est.rank_memory_bytes) / gib:.1f} GiB of "
            f"{est.capacity_bytes / gib:.1f}" + ("" if est.feasible else " (does not fit)"))


def estimate_dlrm_cmd(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, as_json: bool,
                      codec_gbps: float | None, other: bool) -> None:
    from distscope.model.embedding_cost import estimate_dlrm, sharding_counts
    from distscope.model.hybrid_embedding import HybridEmbedding
    from distscope.report.console import breakdown_table, out, print_json

    sc = _scenario(workload, system, plan, codec_gbps=codec_gbps, other=other)
    spec, cluster, gb, comp, shardings, source = (sc.spec, sc.cluster, sc.global_batch, sc.compression, sc.shardings,
                                                  sc.source)
    est = estimate_dlrm(spec, cluster, shardings, global_batch=gb, compression=comp)
    if as_json:
        print_json({"model": workload.model, "cluster": cluster.name, "gpus": cluster.num_gpus, "global_batch": gb,
                    "sharding": source, "sharding_types": sharding_counts(shardings), **est.to_dict(),
                    "compression": None if comp is None else dataclasses.asdict(comp),
                    "tables": [shardings.to_dict()] if isinstance(shardings, HybridEmbedding) else
                    [ts.to_dict() for ts in shardings]})
        return
    out.print(breakdown_table(f"{spec.name}: {len(spec.tables)} tables ({spec.embedding_params / 1e9:,.2f}B rows x "
                              f"dims), {spec.dense_params / 1e6:,.1f}M dense params, {cluster.num_gpus} GPUs of "
                              f"{cluster.device.name}, global batch {gb}; sharding: {source} "
                              f"{sharding_counts(shardings)}",
                              est.breakdown_s, est.step_time_s, ms=True))
    out.print(_summary(spec, cluster, shardings, est), markup=False)
    if comp is not None:
        out.print(_codec_line(comp), markup=False)


def _codec_line(comp: EmbCompression) -> str:
    return (f"embedding all-to-all compressed by {comp.label}: {comp.ratio_fwd:.2f}x fewer bytes forward, "
            f"{comp.ratio_bwd:.2f}x backward, codec at {comp.encode_Bps / 1e9:.2f} / {comp.decode_Bps / 1e9:.2f} GB/s "
            f"(encode / decode; --quant-gbps sets a GPU codec's rate); final loss "
            f"{comp.loss_vs_uncompressed_pct:+.2f}% in the convergence check (benchmarks/eb_compress.py)")


def plan_dlrm_cmd(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, write: str | None,
                  codec_gbps: float | None, torchrec: bool, as_json: bool) -> None:
    from rich.table import Table

    from distscope.compress.eb_codec import codec_table
    from distscope.errors import DistscopeError
    from distscope.model.embedding_cost import ShardingType, check_batch
    from distscope.report.console import out, print_json
    from distscope.report.progress import progress
    from distscope.search.embedding_plan import plan_embeddings
    from distscope.search.sharding_file import write_sharding
    from distscope.workload.embedding import load_dlrm

    _checks(workload, dataclasses.replace(plan, sharding=None), False)
    spec = load_dlrm(workload.model)
    cluster = S.build_cluster(system)
    gb = workload.global_batch
    check_batch(gb, cluster.num_gpus)
    allowed = frozenset(ShardingType)
    if plan.sharding is not None:
        if plan.sharding.endswith((".yaml", ".yml")):
            raise DistscopeError(f"--sharding={plan.sharding}: plan searches shardings; give the types it may use "
                                 "(comma list) or estimate the file with `distscope estimate --sharding FILE`")
        allowed = frozenset(ShardingType.parse(x, "--sharding") for x in plan.sharding.split(",") if x.strip())
    auto = (plan.compress or "").strip().lower() == "auto"
    options: list[EmbCompression | None] = [None]
    if auto:
        options += [_compression(dataclasses.replace(plan, compress=f"emb={k}"), codec_gbps) for k in codec_table()]
    elif plan.compress is not None:
        options = [_compression(plan, codec_gbps)]
    elif codec_gbps is not None:
        _compression(plan, codec_gbps)  # refuses --quant-gbps without --compress
    with progress(None, "pricing embedding shardings") as bar:
        found = [(c, plan_embeddings(spec, cluster, global_batch=gb, allowed=allowed, compression=c, progress=bar))
                 for c in options]
    comp, result = min(found, key=lambda x: x[1].estimate.step_time_s)
    side = _against_torchrec(spec, cluster, gb, result.estimate) if torchrec else None
    again = (f"distscope estimate --model {workload.model} --cluster {cluster.name} --gpus {cluster.num_gpus} "
             f"--global-batch {gb}" + (f" --sharding {write}" if write else "")
             + ("" if comp is None else f" --compress emb={comp.label}")
             + ("" if comp is None or codec_gbps is None else f" --quant-gbps {codec_gbps:g}"))
    if write:
        write_sharding(write, result.shardings)
    est = result.estimate
    base = {k: v for k, v in result.baselines.items() if v is not None}
    why = "; ".join(f"every table {k} (table-wise where it does not apply): {v.step_time_s * 1e3:.3f} ms "
                    f"({v.step_time_s / est.step_time_s:.2f}x)" for k, v in base.items())
    searched = {("none" if c is None else c.label): r.estimate.step_time_s for c, r in found}
    if as_json:
        print_json({"model": workload.model, "cluster": cluster.name, "gpus": cluster.num_gpus, "global_batch": gb,
                    **result.to_dict(), "compression": None if comp is None else dataclasses.asdict(comp),
                    "compression_searched": searched, "estimate_command": again, "why": why,
                    "torchrec": side})
        return
    t = Table(title=f"{spec.name} on {cluster.num_gpus} GPUs of {cluster.name} · global batch {gb}: the sharding found "
                    f"({result.evaluated} shardings priced)")
    for col in ("table", "rows", "dim", "pooling", "sharding", "ranks"):
        t.add_column(col, justify="left" if col in ("table", "sharding", "ranks") else "right")
    for ts in result.shardings:
        ranks = sorted({s.rank for s in ts.shards})
        shown = ",".join(map(str, ranks)) if len(ranks) <= 8 else f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"
        kind = ts.kind.value + (f" x{len(ts.shards)}" if ts.kind is ShardingType.COLUMN_WISE else "")
        t.add_row(ts.table.name, f"{ts.table.rows:,}", str(ts.table.dim), f"{ts.table.pooling:g}", kind, shown)
    out.print(t)
    out.print(_summary(spec, cluster, result.shardings, est), markup=False)
    terms = sorted(est.breakdown_s.items(), key=lambda kv: -kv[1])[:3]
    out.print("largest terms: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in terms), markup=False)
    if why:
        out.print(f"[bold]against one type for every table[/bold]: {why}")
    if len(found) > 1:
        out.print("embedding compression searched: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in searched.items()),
                  markup=False)
    if comp is not None:
        out.print(_codec_line(comp), markup=False)
    if side is not None:
        _print_torchrec(side)
    out.print("[bold]reproduce[/bold]:" + ("" if write else " (add --write-sharding FILE to save the sharding)"))
    out.print(again, markup=False, soft_wrap=True)


def _against_torchrec(spec: DlrmSpec, cluster: Cluster, global_batch: int, ours: DlrmEstimate) -> dict[str, Any]:
    """TorchRec's plan of the same tables (search/torchrec_plan.py) priced by distscope's model, and every
    rank's costs: distscope's lookup time and sent bytes for both plans, TorchRec's own estimate."""
    from distscope.model.embedding_cost import estimate_dlrm, sharding_counts
    from distscope.search.torchrec_plan import torchrec_plan

    sh, ranks = torchrec_plan(spec, cluster, global_batch=global_batch)
    theirs = estimate_dlrm(spec, cluster, sh, global_batch=global_batch)
    kinds = sharding_counts(sh)
    return {"torchrec_plan_step_s": theirs.step_time_s, "distscope_plan_step_s": ours.step_time_s,
            "torchrec_sharding_types": kinds, "tables": [ts.to_dict() for ts in sh],
            "ranks": [{"rank": r, "distscope_lookup_s": ours.rank_lookup_s[r], "distscope_sent_bytes": ours.rank_sent_bytes[r],
                       "torchrec_plan_lookup_s": theirs.rank_lookup_s[r],
                       "torchrec_plan_sent_bytes": theirs.rank_sent_bytes[r], "torchrec_estimate_s": ranks[r]}
                      for r in range(cluster.num_gpus)]}


def _print_torchrec(side: dict[str, Any]) -> None:
    from rich.table import Table

    from distscope.report.console import out

    t = Table(title=f"TorchRec's planner on the same tables {side['torchrec_sharding_types']}: "
                    f"{side['torchrec_plan_step_s'] * 1e3:.3f} ms per step in distscope's model, against "
                    f"{side['distscope_plan_step_s'] * 1e3:.3f} ms for distscope's sharding")
    for col in ("rank", "distscope: lookups ms", "sent MB", "TorchRec's plan: lookups ms", "sent MB",
                "TorchRec's own estimate ms"):
        t.add_column(col, justify="right")
    for r in side["ranks"]:
        t.add_row(str(r["rank"]), f"{r['distscope_lookup_s'] * 1e3:.3f}", f"{r['distscope_sent_bytes'] / 1e6:.1f}",
                  f"{r['torchrec_plan_lookup_s'] * 1e3:.3f}", f"{r['torchrec_plan_sent_bytes'] / 1e6:.1f}",
                  f"{r['torchrec_estimate_s'] * 1e3:.3f}")
    out.print(t)
    out.print("TorchRec's estimate sums each shard's lookups and communication at its topology's bandwidths "
              "(perf per shard, what its partitioner balances); distscope's columns are its step model's terms for "
              "the same ranks", markup=False)
