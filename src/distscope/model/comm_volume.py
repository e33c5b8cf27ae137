"""Communication volume per training step, per (op, parallel dim), for one rank: bytes from first principles.

The tensor-level reference of what a real PyTorch job moves (checked byte for byte against logged gloo
runs, tests/measure/test_layouts.py). `estimate --comm-volume` reports the bytes of the plan's trace
(trace/volume.py), which tests/trace/test_volume.py compares with this model.

Pure (no torch). Bytes follow nccl-tests (all_gather: gathered output, reduce_scatter: full input, else
the buffer); point-to-point is split into SEND and RECV as the rank issues them. What one optimizer step
issues, for a rank in pipeline stage `stage`, with m = global_batch / (dp * micro_batch) micro-batches and
a micro-batch activation of A = micro_batch * seq * hidden elements:

Parameters are enumerated tensor by tensor in the Megatron/GPT-2 layout (`param_tensors`), because FSDP's
padding depends on each tensor's first dimension, not only on the parameter count:
  per layer: norm1, fused qkv [(a + 2g) d / tp, h] (+ bias), attention out [h, a d / tp] (+ bias [h]),
  norm2, fc1 [k f / tp, h] (k = 2 for SwiGLU's fused gate/up, else 1; + bias), fc2 [h, f / tp] (+ bias [h]);
  word embedding [V / tp, h] (vocab parallel), learned positions [P, h], final norm, LM head [V / tp, h]
  (vocab parallel) unless tied. Norms, row-parallel biases and positions stay replicated over tp.

DP, zero_stage 0 (DDP): ALL_REDUCE of the stage's gradients once per step,
  sum(numel) * grad bytes. DDP packs gradients into flat buckets of exactly their numels (no alignment
  padding), so bucketing changes the number of calls, never the bytes.
DP, zero_stage 3 (FSDP2 `fully_shard`, one unit per layer plus the root holding the rest): every tensor is
  split on dim 0 into dp chunks of ceil(d0 / dp) rows, so each is padded to ceil(d0 / dp) * dp rows:
  padded(t) = ceil(d0 / dp) * dp * prod(other dims). Per micro-batch each layer unit is all-gathered in
  forward and again in backward (reshard_after_forward=True); the root unit once (FSDP2 keeps the root
  unsharded between forward and backward). ALL_GATHER bytes = padded numel * param bytes per gather.
  Gradients are reduce-scattered once per step: REDUCE_SCATTER bytes = sum padded numel * grad bytes.
TP (Megatron, Shoeybi et al. 2019; no sequence parallelism), per micro-batch: each layer 2 ALL_REDUCEs
  of A elements forward (g after attention out and fc2) and 2 backward (f before qkv and fc1); the
  vocab-parallel embedding 1 forward (g); the parallel head 1 backward (f before it); the vocab-parallel
  cross entropy 3 forward of micro_batch * seq fp32 values (max logit, target logit, sum of exp; Megatron
  computes it in fp32). Total ALL_REDUCE elements: (4 L_stage + [first] + [last]) A + [last] 3 b s (fp32).
PP: per micro-batch a stage SENDs its output activation (A elements) forward unless it is last, and the
  gradient of its input backward unless it is first; RECV mirrors it. Tied embeddings with pp > 1
  (Megatron): the last stage holds a copy of the word embedding for the head, and the first and last
  stages ALL_REDUCE its gradient (V h grad bytes, labelled pp) once per step.
Activations/TP/PP messages use `activation` bytes, all-gathered parameters `param` bytes, gradient
reductions `grad` bytes (see CommDtypes). Recompute would repeat forward TP traffic and is rejected, as
are MoE/MLA models, cp > 1, ZeRO-1/2 and FSDP combined with tp or pp: these are not modelled here.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from distscope.comm.collective import Collective
from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.plan import Dim, Plan, Recompute
from distscope.workload.spec import FfnKind, ModelSpec, NormKind, PositionKind
from distscope.workload.training import TrainingShape


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommDtypes:
    param: DType  # FSDP all-gather dtype (FSDP2 MixedPrecisionPolicy.param_dtype, else the storage dtype)
    grad: DType  # gradient reduction dtype
    activation: DType  # TP and PP messages

    @classmethod
    def for_plan(cls, plan: Plan) -> CommDtypes:
        act = plan.precision.activation_dtype
        return cls(param=act, grad=plan.grad_reduce_dtype, activation=act)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ParamTensor:
    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def padded_numel(self, shards: int) -> int:
        """FSDP2 dim-0 sharding: ceil(d0 / shards) rows per shard, shards of them."""
        return math.ceil(self.shape[0] / shards) * shards * math.prod(self.shape[1:])


def _norm(spec: ModelSpec, name: str) -> list[ParamTensor]:
    h = spec.hidden
    out = [ParamTensor(name=f"{name}.weight", shape=(h,))]
    if spec.norm is NormKind.LAYERNORM and spec.bias:
        out.append(ParamTensor(name=f"{name}.bias", shape=(h,)))
    return out


def layer_tensors(spec: ModelSpec, tp: int) -> list[ParamTensor]:
    """One transformer layer's tensors on one tp rank (dense FFN)."""
    h, a, g, d, f = spec.hidden, spec.heads, spec.kv_heads, spec.dhead, spec.ffn_hidden
    k = 2 if spec.ffn is FfnKind.SWIGLU else 1
    qkv_rows, ffn_rows = (a + 2 * g) * d // tp, k * f // tp
    ts = [*_norm(spec, "norm1"), ParamTensor(name="qkv.weight", shape=(qkv_rows, h))]
    if spec.bias:
        ts.append(ParamTensor(name="qkv.bias", shape=(qkv_rows,)))
    ts.append(ParamTensor(name="proj.weight", shape=(h, a * d // tp)))
    if spec.bias:
        ts.append(ParamTensor(name="proj.bias", shape=(h,)))
    ts += [*_norm(spec, "norm2"), ParamTensor(name="fc1.weight", shape=(ffn_rows, h))]
    if spec.bias:
        ts.append(ParamTensor(name="fc1.bias", shape=(ffn_rows,)))
    ts.append(ParamTensor(name="fc2.weight", shape=(h, f // tp)))
    if spec.bias:
        ts.append(ParamTensor(name="fc2.bias", shape=(h,)))
    return ts


def embedding_tensors(spec: ModelSpec, tp: int = 1) -> list[ParamTensor]:
    ts = [ParamTensor(name="embed.tok", shape=(spec.vocab // tp, spec.hidden))]
    if spec.position is PositionKind.LEARNED:
        ts.append(ParamTensor(name="embed.pos", shape=(spec.max_positions, spec.hidden)))
    if spec.embedding_norm:
        ts += _norm(spec, "embed.norm")
    return ts


def head_tensors(spec: ModelSpec, tp: int = 1) -> list[ParamTensor]:
    ts = _norm(spec, "final_norm")
    if not spec.tied_embeddings:
        ts.append(ParamTensor(name="head.out", shape=(spec.vocab // tp, spec.hidden)))
    return ts


def stage_layers(spec: ModelSpec, plan: Plan, stage: int) -> int:
    if not 0 <= stage < plan.pp:
        raise DistscopeError(f"stage={stage} must be in 0..pp-1={plan.pp - 1}")
    if plan.stage_layers:
        return plan.stage_layers[stage]
    if spec.layers % plan.pp:
        raise DistscopeError(f"layers={spec.layers} not divisible by pp={plan.pp}")
    return spec.layers // plan.pp


def _check_supported(spec: ModelSpec, plan: Plan) -> None:
    why = None
    if spec.moe is not None or spec.mla is not None:
        why = "MoE/MLA models"
    elif spec.special_layers is not None:
        why = spec.special_layers
    elif spec.mtp_layers:
        why = f"mtp_layers={spec.mtp_layers} (multi-token prediction modules)"
    elif plan.cp > 1 or plan.ep > 1 or plan.vp > 1:
        why = f"cp={plan.cp} ep={plan.ep} vp={plan.vp} (only 1 is modelled)"
    elif plan.zero_stage in (1, 2) or plan.distributed_optimizer:
        why = f"zero_stage={plan.zero_stage} / distributed optimizer"
    elif plan.zero_stage == 3 and (plan.tp > 1 or plan.pp > 1):
        why = "FSDP combined with tp or pp"
    elif plan.recompute is not Recompute.NONE:
        why = f"recompute={plan.recompute.value}"
    elif plan.sp:
        why = "sequence parallelism (its norm-gradient all-reduces and SP embedding/head)"
    elif spec.vocab % plan.tp:
        why = f"vocab={spec.vocab} not divisible by tp={plan.tp} (pad the vocab as Megatron does)"
    if why:
        raise DistscopeError(f"comm_volume does not model {why} [plan: {plan.degrees()}]")


def comm_volume(
    spec: ModelSpec, shape: TrainingShape, plan: Plan, *, stage: int = 0, dtypes: CommDtypes | None = None
) -> dict[tuple[Collective, Dim], int]:
    """Bytes one rank of pipeline stage `stage` issues per optimizer step, per (op, dim); see module doc."""
    _check_supported(spec, plan)
    dt = dtypes or CommDtypes.for_plan(plan)
    if shape.global_batch % (plan.dp * plan.micro_batch):
        raise DistscopeError(
            f"global_batch={shape.global_batch} not divisible by dp*micro_batch={plan.dp * plan.micro_batch}"
        )
    m = plan.microbatches(shape.global_batch)
    n_layers = stage_layers(spec, plan, stage)
    first, last = stage == 0, stage == plan.pp - 1
    act_elems = plan.micro_batch * shape.seq_len * spec.hidden
    layer = layer_tensors(spec, plan.tp)
    tp = plan.tp
    rest = (embedding_tensors(spec, tp) if first else []) + (head_tensors(spec, tp) if last else [])
    if spec.tied_embeddings and plan.pp > 1 and last:
        rest.append(ParamTensor(name="head.tied_word_embedding", shape=(spec.vocab // tp, spec.hidden)))
    out: dict[tuple[Collective, Dim], float] = defaultdict(float)

    if plan.dp > 1 and plan.zero_stage == 0:
        numel = n_layers * sum(t.numel for t in layer) + sum(t.numel for t in rest)
        out[(Collective.ALL_REDUCE, Dim.DP)] += numel * dt.grad.bytes
    elif plan.dp > 1:  # zero_stage 3: FSDP2
        layer_pad = sum(t.padded_numel(plan.dp) for t in layer)
        root_pad = sum(t.padded_numel(plan.dp) for t in rest)
        out[(Collective.ALL_GATHER, Dim.DP)] += m * (2 * n_layers * layer_pad + root_pad) * dt.param.bytes
        out[(Collective.REDUCE_SCATTER, Dim.DP)] += (n_layers * layer_pad + root_pad) * dt.grad.bytes

    if tp > 1:
        points = 4 * n_layers + int(first) + int(last)  # per micro-batch, A elements each
        out[(Collective.ALL_REDUCE, Dim.TP)] += m * points * act_elems * dt.activation.bytes
        if last:  # vocab-parallel cross entropy: 3 all-reduces of [micro_batch * seq] fp32
            out[(Collective.ALL_REDUCE, Dim.TP)] += m * 3 * plan.micro_batch * shape.seq_len * DType.FP32.bytes

    if plan.pp > 1:
        if spec.tied_embeddings and (first or last):
            out[(Collective.ALL_REDUCE, Dim.PP)] += spec.vocab // tp * spec.hidden * dt.grad.bytes
        msg = m * act_elems * dt.activation.bytes
        sends = (0 if last else 1) + (0 if first else 1)  # activation forward, input gradient backward
        out[(Collective.SEND, Dim.PP)] += sends * msg
        out[(Collective.RECV, Dim.PP)] += sends * msg

    bad = {k: v for k, v in out.items() if v != int(v)}
    if bad:  # fractional bytes (e.g. int4): refuse rather than round silently
        raise DistscopeError(f"comm volume has fractional bytes {bad} [plan: {plan.degrees()}]")
    return {k: int(v) for k, v in sorted(out.items(), key=lambda kv: (kv[0][1].value, kv[0][0].value))}
