"""Serving flags -> (Replica, replicas, policy), once: strings become enums here and every error names
the flag and its value (the same path the training verbs take through distscope.scenario)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.plan import parse_enum
from distscope.scenario import SystemFlags, build_cluster
from distscope.serve.context import check_lengths, context_len
from distscope.serve.layout import Layout
from distscope.serve.precision import ServePrecision, parse_dtype
from distscope.serve.replica import Replica, build_replica
from distscope.serve.stack import Policy, for_device, get_stack
from distscope.workload.catalog import get_model

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Catalog key (see `distscope models`) or a Hugging Face config.json.")]
ClusterOpt = Annotated[str, typer.Option("--cluster", "-c", help="Cluster preset: dgx-h100, dgx-h200, dgx-a100, dgx-b200, l40s-pcie, mi300x-oam, ...")]
GpusOpt = Annotated[int | None, typer.Option("--gpus", "-n", help="GPUs in all, a multiple of tp·pp; replicas = gpus / (tp·pp) (default: one replica, or what simulate's --replicas / --disagg need).")]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree of a replica.")]
PpOpt = Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree of a replica.")]
EpOpt = Annotated[int, typer.Option("--ep", help="Expert-parallel degree (inside the TP group; MoE models).")]
WeightsOpt = Annotated[str, typer.Option("--weights", help="Weight dtype: bf16, fp16, fp8, int8, int4, fp4.")]
ActOpt = Annotated[str, typer.Option("--act", help="GEMM activation dtype; auto = the weight dtype where the GPU has its tensor cores, else bf16.")]
KvOpt = Annotated[str, typer.Option("--kv", help="KV-cache dtype: bf16, fp16, fp8, int8, int4, fp4.")]
StackOpt = Annotated[str, typer.Option("--stack", help="Serving stack: trtllm, trtllm-0.6, vllm (0.6-0.7), vllm-0.5, vllm-chunked, vllm-v1, sglang, ideal.")]
SchedulerOpt = Annotated[str | None, typer.Option("--scheduler", help="Override the stack's policy: static, vllm, inflight, chunked.")]
MaxBatchOpt = Annotated[int | None, typer.Option("--max-batch", help="Most sequences in flight per replica (default: the stack's).")]
ChunkOpt = Annotated[int | None, typer.Option("--chunk", help="Prompt tokens per iteration (chunked-prefill budget; default: the stack's).")]
InputOpt = Annotated[int, typer.Option("--input-len", help="Prompt tokens per request (mean with --lengths exponential).")]
OutputOpt = Annotated[int, typer.Option("--output-len", help="Output tokens per request (mean with --lengths exponential).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the user set parameter `name` (on the command line or in the environment), not its default.
    By the source's name: typer bundles its own click, whose ParameterSource is not click's."""
    src = ctx.get_parameter_source(name)
    return src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")


def parse_disagg(value: str) -> tuple[int, int]:
    """`P:D` -> (prefill replicas, decode replicas), both >= 1."""
    try:
        p, d = (int(x) for x in value.split(":"))
    except ValueError:
        raise DistscopeError(f"--disagg={value!r} must look like P:D, e.g. 1:3") from None
    if p < 1 or d < 1:
        raise DistscopeError(f"--disagg={value!r}: both pools need at least one replica")
    return p, d


def replica_pools(*, gpus: int | None, tp: int, pp: int, replicas: int | None, disagg: str | None) -> tuple[int, int, int]:
    """(replicas, decode replicas, GPUs in all) from --gpus, --replicas and --disagg P:D, in units of one
    replica's tp·pp GPUs. What is given must agree (gpus = replicas·tp·pp, replicas = P + D) and is never
    dropped; what is left out is derived from the rest: gpus from --disagg or --replicas, replicas from
    --gpus (or from P:D as P prefill + D decode), one replica when none is given."""
    per = tp * pp
    if per < 1:
        raise DistscopeError(f"tp={tp} pp={pp}: both must be >= 1")
    if replicas is not None and replicas < 1:
        raise DistscopeError(f"--replicas={replicas} must be >= 1")
    pools = parse_disagg(disagg) if disagg else None
    n = sum(pools) if pools else replicas
    if pools and replicas is not None and replicas != n:
        raise DistscopeError(f"--replicas={replicas} and --disagg={disagg} disagree: the pools hold {n} replicas")
    if gpus is not None:
        if gpus < per:
            raise DistscopeError(f"--gpus={gpus} is fewer than one replica needs (tp·pp = {per})")
        if gpus % per:
            raise DistscopeError(f"--gpus={gpus} is not a multiple of tp·pp = {per} (tp={tp}, pp={pp}): "
                                 f"{gpus % per} GPU(s) would serve nothing")
        if n is not None and n * per != gpus:
            flag = f"--disagg={disagg}" if pools else f"--replicas={replicas}"
            raise DistscopeError(f"{flag} needs {n} replicas × tp·pp {per} = {n * per} GPUs but --gpus={gpus} "
                                 f"({gpus // per} replicas): give --gpus {n * per}, or leave --gpus out to derive it")
        n = gpus // per
    n = n or 1
    return (pools[0], pools[1], n * per) if pools else (n, 0, n * per)


def parse_act(act: str, weights: DType, cluster_device: object) -> DType:
    if act.strip().lower() != "auto":
        return parse_dtype(act, "--act")
    from distscope.system.device import Device

    assert isinstance(cluster_device, Device)
    native = weights in (DType.FP8, DType.INT8, DType.FP4) and dict(cluster_device.peak_flops).get(weights, 0.0) > 0
    return weights if native else DType.BF16


@dataclasses.dataclass(frozen=True, kw_only=True)
class Serving:
    replica: Replica
    replicas: int
    policy: Policy


def build_serving(*, model: str, cluster: str, gpus: int | None, tp: int, pp: int, ep: int, weights: str, act: str,
                  kv: str, stack: str, scheduler: str | None = None, max_batch: int | None = None,
                  chunk: int | None = None, input_len: int | None = None, output_len: int | None = None,
                  kv_fraction: float | None = None) -> Serving:
    spec = get_model(model)
    layout = Layout(tp=tp, pp=pp, ep=ep)
    total = gpus if gpus is not None else layout.gpus
    if total > 65_536:
        raise DistscopeError(f"--gpus={total} exceeds the 65,536 GPUs serve models")
    if total < layout.gpus:
        raise DistscopeError(f"--gpus={total} is fewer than one replica needs (tp·pp = {layout.gpus})")
    if total % layout.gpus:
        raise DistscopeError(f"--gpus={total} is not a multiple of tp·pp = {layout.gpus} (tp={tp}, pp={pp}): "
                             f"{total % layout.gpus} GPU(s) would serve nothing")
    c = build_cluster(SystemFlags(cluster=cluster, gpus=max(total, layout.gpus)))
    w = parse_dtype(weights, "--weights")
    prec = ServePrecision(weights=w, activations=parse_act(act, w, c.device), kv=parse_dtype(kv, "--kv"))
    st = for_device(get_stack(stack), c.device.usable_bytes, c.device.name)
    if max_batch is not None:
        if max_batch < 1:
            raise DistscopeError(f"--max-batch={max_batch} must be >= 1")
        st = dataclasses.replace(st, max_num_seqs=max_batch)
    if chunk is not None:
        if chunk < 1:
            raise DistscopeError(f"--chunk={chunk} must be >= 1")
        st = dataclasses.replace(st, max_batched_tokens=chunk)
    if st.max_batched_tokens < st.max_num_seqs:
        raise DistscopeError(f"--chunk={st.max_batched_tokens} must be >= --max-batch={st.max_num_seqs}: every running "
                             "sequence needs a token of the iteration's budget (vLLM's rule)")
    policy = st.policy if scheduler is None else parse_enum(Policy, scheduler, "--scheduler")
    assert isinstance(policy, Policy)
    if policy is not st.policy:
        st = dataclasses.replace(st, policy=policy)
    window = context_len(spec, model)
    if input_len is not None and output_len is not None:
        check_lengths(spec, input_len, output_len, window)
    rep = build_replica(spec=spec, cluster=c, layout=layout, prec=prec, stack=st, context=window, kv_fraction=kv_fraction)
    return Serving(replica=rep, replicas=total // layout.gpus, policy=policy)
