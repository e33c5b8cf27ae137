"""Diffusion inference with patch parallelism: one image's denoising steps split into patches over GPUs.

A diffusion denoiser (a UNet or a DiT, any `torch:` module whose first input is the latent, N×C×H×W) runs
`steps` times per image. Patch parallelism (DistriFusion, Li et al., CVPR'24; PCPP, Zhang et al. 2024)
splits the latent's rows into `p` patches, one per GPU, and exchanges what each layer needs from the other
patches. The mechanics follow distrifuser's code (github.com/mit-han-lab/distrifuser,
`distrifuser/modules/pp/*.py`, `utils.py`):

- **Classifier-free guidance split** (`split_batch`, on by default): the conditional and unconditional
  halves of the batch run on two groups of N/2 GPUs, so an image is split into p = N/2 patches; with
  N = 2 each GPU runs one half on the whole image and nothing is exchanged inside a step.
- **What each device computes** is the module traced on its patch (rows H/p, batch halved under the
  CFG split). Self-attention queries come from the patch while its keys and values cover the whole
  image, so each self-attention is re-priced at seq_kv = p·seq_q (`kv_rows`); cross-attention (keys
  from the text) is not. The halo rows a convolution adds to its patch (≤ 2·pad/h of its work) are
  not priced.
- **What each device sends per step**: every self-attention's K and V of its patch, every padded
  convolution's two boundary rows of its input, every group norm's per-group mean and mean-square
  (the trace's `Op.exchange_bytes`), as all-gathers over the p devices of its group.
- **Modes** (`PatchMode`):
  - `displaced` (DistriFusion): the exchange of step t is used at step t+1 (stale activations), so it
    runs asynchronously beside the compute, in all-gathers of `COMM_CHECKPOINT` tensors each;
    the first warmup_steps + 1 steps (`counter <= warmup_steps`) are synchronous: one blocking
    all-gather per layer. Step = max(compute, exchange), or compute + exchange when synchronous.
  - `sync`: every step synchronous (full conditioning on fresh activations).
  - `pcpp` (Partially Conditioned Patch Parallelism): each patch attends to itself and a fraction
    `pcpp_ratio` of each neighbouring patch, received point to point from its (at most 2) neighbours;
    convolution boundaries also go point to point; group-norm statistics are still all-gathered.
    Asynchronous as `displaced`, with the same warm-up.
  - `naive`: patches never exchange anything (DistriFusion's "naive patch" baseline; visible seams).
- **The implementation's own copies** (distrifuser's modules, priced at HBM speed, `_copies`): each
  self-attention concatenates the gathered K and V (`torch.cat(buffer_list)`); each padded convolution
  builds its padded input (`torch.cat` with the neighbours' rows, and `F.pad` at an image edge, which
  the slowest patch has); each group norm is the corrected asynchronous one in plain PyTorch ops
  (mean, square, mean, subtract, divide, scale, shift: 12 passes over the activation where the fused
  kernel makes 2, and torch's reductions spread over many blocks, where nn.GroupNorm's statistics kernel
  runs one block per group: module_estimate.group_norm_stats_s); each exchanged tensor is copied into the
  flat communication buffer.
- **Every step** ends with a blocking all-gather of the output over all N GPUs (the patches and the
  CFG halves; its size is taken as the latent input's, as for a denoiser that predicts noise).

With CUDA graphs (distrifuser's default) the host never bounds a step; without them (`cuda_graph=False`)
a step is at least its ops' eager host time (model/host.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from distscope.comm import Collective, GroupNet, collective_s, group_net
from distscope.enums import Enum
from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model import host
from distscope.model.module_estimate import attention_s, op_s
from distscope.system.device import Device
from distscope.system.topology import Cluster
from distscope.workload.module_graph import InputSpec, ModuleGraph, Op, OpKind

# distrifuser's DistriConfig(comm_checkpoint=60): the comm manager issues one all-gather per 60 queued tensors
COMM_CHECKPOINT = 60


class PatchMode(Enum):
    DISPLACED = "displaced"
    SYNC = "sync"
    PCPP = "pcpp"
    NAIVE = "naive"


@dataclasses.dataclass(frozen=True)
class PatchPlan:
    """How one image is denoised on `gpus` GPUs (module docstring)."""

    gpus: int
    mode: PatchMode = PatchMode.DISPLACED
    steps: int = 50
    warmup_steps: int = 4  # distrifuser's default
    cfg_split: bool = True  # the input's batch holds the CFG halves, run on two GPU groups
    pcpp_ratio: float = 0.5  # PCPP: the fraction of each neighbouring patch a patch attends to
    cuda_graph: bool = True

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise DistscopeError(f"gpus={self.gpus} must be >= 1")
        if self.steps < 1 or self.warmup_steps < 0:
            raise DistscopeError(f"steps={self.steps} must be >= 1 and warmup_steps={self.warmup_steps} >= 0")
        if not 0.0 < self.pcpp_ratio <= 1.0:
            raise DistscopeError(f"pcpp_ratio={self.pcpp_ratio} must be in (0, 1]")
        if self.cfg_split and self.gpus > 1 and self.gpus % 2:
            raise DistscopeError(f"gpus={self.gpus}: the classifier-free-guidance split needs an even GPU count "
                                 "(or turn the split off)")

    @property
    def patches(self) -> int:
        """Patches per image: the GPUs of one CFG group."""
        return self.gpus // 2 if self.cfg_split and self.gpus > 1 else self.gpus

    @property
    def sync_steps(self) -> int:
        """Steps whose exchange blocks: all in sync mode, distrifuser's `counter <= warmup_steps` otherwise."""
        if self.patches == 1 or self.mode is PatchMode.NAIVE:
            return 0
        return self.steps if self.mode is PatchMode.SYNC else min(self.steps, self.warmup_steps + 1)


def patch_inputs(inputs: tuple[InputSpec, ...], plan: PatchPlan) -> tuple[InputSpec, ...]:
    """The inputs one GPU traces: the latent (first input, N×C×H×W) cut to H/patches rows, and every
    input's batch halved under the CFG split; one line when the shapes do not divide."""
    lat = inputs[0]
    if len(lat.shape) != 4:
        raise DistscopeError(f"--input {lat.text}: patch parallelism splits the rows of a 4-d latent (N×C×H×W)")
    b, h, p = lat.shape[0], lat.shape[2], plan.patches
    halves = 2 if plan.cfg_split and plan.gpus > 1 else 1
    if b % halves:
        raise DistscopeError(f"--input {lat.text}: the classifier-free-guidance split needs an even batch "
                             f"(conditional and unconditional halves); got {b}")
    if h % p:
        raise DistscopeError(f"--input {lat.text}: {h} latent rows do not split into {p} patches")
    out = [dataclasses.replace(x, shape=(x.shape[0] // halves, *x.shape[1:])) for x in inputs]
    out[0] = dataclasses.replace(out[0], shape=(b // halves, lat.shape[1], h // p, lat.shape[3]))
    return tuple(out)


def _self_attention(op: Op) -> bool:
    """A self-attention of the patch trace: its keys are its queries' rows (cross-attention's are not)."""
    return op.attn is not None and op.attn.seq_q == op.attn.seq_kv


def kv_rows(seq: int, plan: PatchPlan) -> int:
    """Key/value length a patch's self-attention covers: the whole image (p·seq) when displaced or
    synchronous, the patch and pcpp_ratio of each of its (≤ 2) neighbours under PCPP, the patch alone
    when naive."""
    p = plan.patches
    if p == 1 or plan.mode is PatchMode.NAIVE:
        return seq
    if plan.mode is PatchMode.PCPP:
        return seq + round(min(2, p - 1) * plan.pcpp_ratio * seq)
    return seq * p


@dataclasses.dataclass(frozen=True)
class PatchStep:
    """One denoising step on one GPU."""

    compute_s: float
    exchange_bytes: float  # what one GPU contributes per step
    async_comm_s: float  # the exchange when overlapped (chunked all-gathers / point-to-point)
    sync_comm_s: float  # the exchange when blocking (one collective per layer)
    gather_s: float  # the output all-gather that ends every step (blocking)

    @property
    def async_step_s(self) -> float:
        return max(self.compute_s, self.async_comm_s) + self.gather_s

    @property
    def sync_step_s(self) -> float:
        return self.compute_s + self.sync_comm_s + self.gather_s


# distrifuser's DistriGroupNorm: x.mean, x**2, .mean, (x - mean), / std, * weight, + bias = 12 passes of
# the activation (read or read + write) where nn.GroupNorm's fused kernel reads and writes it once
GN_EXTRA_PASSES = 10
GN_EXTRA_KERNELS = 6


def _copies(graph: ModuleGraph, plan: PatchPlan) -> tuple[float, int]:
    """(HBM bytes, kernels) the patch-parallel modules add per step (module docstring)."""
    if plan.patches == 1 or plan.mode is PatchMode.NAIVE:
        return 0.0, 0
    nbytes, kernels, first_conv = 0.0, 0, True
    for op in graph.ops:
        if _self_attention(op):
            assert op.attn is not None
            a = op.attn
            kv = a.batch_heads * (a.d_qk + a.d_v) * graph.dtype.bytes
            nbytes += 2 * kv * kv_rows(a.seq_kv, plan) + 2 * kv * a.seq_kv  # the cat; the buffer copy
            kernels += 2
        elif op.kind is OpKind.CONV and op.name == "convolution":
            if not first_conv and op.exchange_bytes > 0:  # cat and F.pad at the edge, each reading and writing x
                nbytes += 4 * op.in_bytes + 4 * op.exchange_bytes
                kernels += 3
            first_conv = False
        elif op.name == "native_group_norm":
            nbytes += GN_EXTRA_PASSES * op.in_bytes + 2 * op.exchange_bytes
            kernels += GN_EXTRA_KERNELS + 1
    return nbytes, kernels


def _compute_s(graph: ModuleGraph, device: Device, plan: PatchPlan) -> float:
    copies, kernels = _copies(graph, plan)
    gpu = eff.elementwise_s(device, copies, kernels) if kernels else 0.0
    for op in graph.ops:
        if _self_attention(op) and plan.patches > 1:
            assert op.attn is not None
            a = dataclasses.replace(op.attn, seq_kv=kv_rows(op.attn.seq_kv, plan))
            gpu += attention_s(a, op.phase, device, graph.dtype)
        elif op.reduce_rows and plan.patches > 1 and plan.mode is not PatchMode.NAIVE:
            # DistriGroupNorm, not nn.GroupNorm's kernel: torch's own reductions (split over many blocks) and
            # element-wise ops; its passes beyond one read and write are _copies' GN_EXTRA_PASSES
            gpu += eff.elementwise_s(device, op.bytes + op.in_bytes, 1)
        else:
            gpu += op_s(op, device, graph)
    return gpu if plan.cuda_graph else max(gpu, len(graph.ops) * host.op_s(device))


def _exchanged(graph: ModuleGraph) -> list[tuple[float, bool]]:
    """(bytes, all-gathered even under PCPP) per exchanged tensor, in the order distrifuser queues them:
    K and V of each self-attention, both boundaries of each padded convolution but the first (it reads
    the whole latent), each group norm's statistics."""
    out: list[tuple[float, bool]] = []
    first_conv = True
    for op in graph.ops:
        if _self_attention(op):
            assert op.attn is not None
            a = op.attn
            out.append((a.batch_heads * a.seq_kv * (a.d_qk + a.d_v) * graph.dtype.bytes, False))
        elif op.kind is OpKind.CONV and op.name == "convolution":
            if not first_conv and op.exchange_bytes > 0:
                out.append((2 * op.exchange_bytes, False))
            first_conv = False
        elif op.exchange_bytes > 0:
            out.append((op.exchange_bytes, True))
    return out


def _async_s(tensors: list[tuple[float, bool]], plan: PatchPlan, g: GroupNet) -> float:
    """The exchange in chunks of COMM_CHECKPOINT tensors: all-gathers over the group, or (PCPP) point to
    point with the neighbours for K, V and boundaries."""
    p, t = plan.patches, 0.0
    for i in range(0, len(tensors), COMM_CHECKPOINT):
        chunk = tensors[i:i + COMM_CHECKPOINT]
        if plan.mode is PatchMode.PCPP:
            gathered = sum(b for b, ag in chunk if ag)
            p2p = sum(b * plan.pcpp_ratio for b, ag in chunk if not ag)
            t += (collective_s(Collective.ALL_GATHER, p * gathered, g) if gathered else 0.0) + \
                collective_s(Collective.SEND_RECV, p2p, g)
        else:
            t += collective_s(Collective.ALL_GATHER, p * sum(b for b, _ in chunk), g)
    return t


def patch_step(graph: ModuleGraph, cluster: Cluster, plan: PatchPlan, out_bytes: float) -> PatchStep:
    """One GPU's denoising step: `graph` is the module traced on its patch (patch_inputs), `out_bytes`
    the output it contributes to the step's closing all-gather."""
    compute = _compute_s(graph, cluster.device, plan)
    gather = collective_s(Collective.ALL_GATHER, plan.gpus * out_bytes, group_net(cluster, plan.gpus)) \
        if plan.gpus > 1 else 0.0
    if plan.patches == 1 or plan.mode is PatchMode.NAIVE:
        return PatchStep(compute, 0.0, 0.0, 0.0, gather)
    g = group_net(cluster, plan.patches)
    tensors = _exchanged(graph)
    sync = sum(collective_s(Collective.ALL_GATHER, plan.patches * b, g) for b, _ in tensors)
    return PatchStep(compute_s=compute, exchange_bytes=sum(b for b, _ in tensors),
                     async_comm_s=_async_s(tensors, plan, g), sync_comm_s=sync, gather_s=gather)


@dataclasses.dataclass(frozen=True)
class DiffusionLatency:
    plan: PatchPlan
    step: PatchStep
    latency_s: float  # the denoising loop (sync_steps blocking steps, the rest overlapped) and the decode
    speedup: float = 1.0  # over the 1-GPU latency of the same sweep
    decode_s: float = 0.0  # one VAE decode after the loop, whole on every GPU (part of latency_s)

    def to_dict(self) -> dict[str, Any]:
        s = self.step
        return {"gpus": self.plan.gpus, "patches": self.plan.patches, "mode": self.plan.mode.value,
                "steps": self.plan.steps, "sync_steps": self.plan.sync_steps, "latency_s": self.latency_s,
                "decode_s": self.decode_s,
                "speedup": self.speedup, "efficiency": self.speedup / self.plan.gpus,
                "compute_s_per_step": s.compute_s, "exchange_bytes_per_step": s.exchange_bytes,
                "async_comm_s_per_step": s.async_comm_s, "sync_comm_s_per_step": s.sync_comm_s,
                "gather_s_per_step": s.gather_s, "async_step_s": s.async_step_s, "sync_step_s": s.sync_step_s}


def latency(step: PatchStep, plan: PatchPlan) -> float:
    """The denoising loop: sync_steps · sync step + the rest · overlapped step."""
    k = plan.sync_steps
    return k * step.sync_step_s + (plan.steps - k) * step.async_step_s


def decode_s(graph: ModuleGraph, device: Device, cuda_graph: bool) -> float:
    """One forward of a decoder (the VAE after the loop) on one GPU: a one-GPU step's compute (its GPU
    time, at least its eager host time without a CUDA graph)."""
    return _compute_s(graph, device, PatchPlan(1, cuda_graph=cuda_graph))


def sweep(trace: Callable[[tuple[InputSpec, ...]], ModuleGraph], inputs: tuple[InputSpec, ...],
          cluster: Cluster, plans: Sequence[PatchPlan], progress: Callable[[], None] | None = None,
          decode: float = 0.0) -> list[DiffusionLatency]:
    """Latency of each plan (one trace per distinct patch shape) with `decode` seconds of VAE decode after
    the loop (not split: DistriFusion's pipeline decodes the whole image on every rank, which caps the
    speed-up as Amdahl's law does), and its speed-up over the same settings on one GPU."""
    graphs: dict[tuple[InputSpec, ...], ModuleGraph] = {}

    def run(plan: PatchPlan) -> DiffusionLatency:
        local = patch_inputs(inputs, plan)
        if local not in graphs:
            graphs[local] = trace(local)
            if progress is not None:
                progress()
        x = local[0]
        step = patch_step(graphs[local], cluster, plan, math.prod(x.shape) * x.dtype.bytes)
        return DiffusionLatency(plan, step, latency(step, plan) + decode, decode_s=decode)

    one = {p.mode: run(dataclasses.replace(p, gpus=1)).latency_s for p in plans}
    return [dataclasses.replace(r, speedup=one[r.plan.mode] / r.latency_s) for r in map(run, plans)]
