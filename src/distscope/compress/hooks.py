"""DDP communication hooks: block-wise int8 / int4 with error feedback, next to PyTorch's own baselines
(fp16/bf16 casts in `default_hooks`, PowerSGD of Vogels et al. 2019 in `powerSGD_hook`).

Quantized all-reduce: integer codes with per-group scales cannot be summed on the wire, so each rank
all-gathers the encoded bucket (world * r bytes, r = ratio of the code) and every rank dequantizes and
sums all contributions; the mean is written back into the bucket. With error feedback, each rank adds
its residual e before quantizing and keeps e' = (g + e) - dequant(quant(g + e)) for the next step
(Karimireddy et al. 2019).
"""

# no `from __future__ import annotations`: DDP's register_comm_hook checks the hook's annotations at
# runtime (bucket must be dist.GradBucket, return torch.futures.Future[torch.Tensor]).
import enum
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

from distscope.compress.quantize import QuantConfig, Rounding, decode, encode
from distscope.errors import DistscopeError


class HookKind(enum.Enum):
    ALLREDUCE = "allreduce"  # no hook: DDP's own fp32 all-reduce (reference)
    FP16 = "fp16"
    BF16 = "bf16"
    POWERSGD = "powersgd"
    INT8_EF = "int8-ef"
    INT4_EF = "int4-ef"


@dataclass(kw_only=True)
class QuantHookState:
    """Hook state: mutable by design (DDP hooks carry state across iterations), one per DDP model."""

    process_group: dist.ProcessGroup | None
    config: QuantConfig
    error_feedback: bool = True
    residuals: dict[int, torch.Tensor] = field(default_factory=dict)


def quantized_allreduce_hook(state: QuantHookState,
                             bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer()
    cfg = state.config
    world = dist.get_world_size(state.process_group)
    n = buf.numel()
    length = cfg.padded_len(n)
    g = buf.float()
    residual = state.residuals.get(bucket.index()) if state.error_feedback else None
    if residual is not None and residual.numel() == n:  # DDP rebuilds buckets after iteration 0
        g = g + residual
    row = torch.nn.functional.pad(g.reshape(1, -1), (0, length - n))
    wire = encode(row, cfg)
    if state.error_feedback:
        state.residuals[bucket.index()] = g - decode(wire, length, cfg)[0, :n]
    gathered = torch.empty(world * wire.shape[1], dtype=torch.uint8, device=buf.device)
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    work = fn(gathered, wire.reshape(-1), group=state.process_group, async_op=True)

    def finish(_: torch.futures.Future) -> torch.Tensor:
        total = decode(gathered.reshape(world, -1), length, cfg)[:, :n].sum(0)
        buf.copy_(total / world)
        return buf

    return work.get_future().then(finish)


def bf16_cast_hook(process_group: dist.ProcessGroup,
                   bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """torch's bf16_compress_hook under another name: DDP refuses to register the original unless the
    backend is NCCL>=2.10 (a check on the function name), but gloo all-reduces bf16 fine."""
    return default_hooks.bf16_compress_hook(process_group, bucket)


def register_hook(model: torch.nn.parallel.DistributedDataParallel, kind: HookKind,
                  process_group: dist.ProcessGroup | None = None, *, int4_group: int = 128,
                  int8_group: int = 2048, powersgd_rank: int = 4) -> object | None:
    """Register `kind` on a DDP model; returns the hook state (None for the reference all-reduce)."""
    if kind is HookKind.ALLREDUCE:
        return None
    if kind is HookKind.FP16:
        model.register_comm_hook(process_group, default_hooks.fp16_compress_hook)
        return process_group
    if kind is HookKind.BF16:
        model.register_comm_hook(process_group, bf16_cast_hook)
        return process_group
    if kind is HookKind.POWERSGD:
        # start_powerSGD_iter must be > 1 with error feedback (buckets are rebuilt after iteration 0)
        psgd = powerSGD_hook.PowerSGDState(process_group=process_group,
                                           matrix_approximation_rank=powersgd_rank,
                                           start_powerSGD_iter=2, min_compression_rate=1)
        model.register_comm_hook(psgd, powerSGD_hook.powerSGD_hook)
        return psgd
    if kind in (HookKind.INT8_EF, HookKind.INT4_EF):
        bits, group = (8, int8_group) if kind is HookKind.INT8_EF else (4, int4_group)
        state = QuantHookState(process_group=process_group,
                               config=QuantConfig(bits=bits, group_size=group, rounding=Rounding.RTN))
        model.register_comm_hook(state, quantized_allreduce_hook)
        return state
    raise DistscopeError(f"hook: kind={kind!r}; valid: {', '.join(k.value for k in HookKind)}")
