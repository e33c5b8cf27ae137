"""A small ZeRO-3-like sharded data-parallel trainer whose weight and gradient traffic go through the
quantized collectives (the setting of SDP4Bit, Jia et al. 2024, Table 1).

Layout: all parameters live in one flat fp32 buffer `model_flat` of P_pad = ceil(P / (W*G)) * W*G
elements (G = lcm of the group sizes), identical on every rank; the parameters are views into it.
Rank r owns the fp32 master shard r (P_pad / W elements) and its AdamW state. One step:
    loss.backward()                          full gradient (P_pad,) on each rank, from its own batch
    grad shard = reduce-scatter(grad) / W    plain | one-level int8/int4 | TLq-HS
    AdamW on the master shard
    weight all-gather into model_flat        plain | direct int4/int8 (qwZ) | qWD int4
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from distscope.compress.collectives import (
    all_gather_weights,
    make_node_groups,
    quantized_reduce_scatter,
    qwd_all_gather,
    tlq_hs_reduce_scatter,
)
from distscope.compress.quantize import QuantConfig, Rounding
from distscope.compress.spec import GRAD_GROUP, WEIGHT_GROUP, CompressionMethod
from distscope.compress.tinygpt import GPTConfig, TinyGPT, make_markov, sample_batch
from distscope.errors import DistscopeError

WEIGHT_METHODS = (CompressionMethod.NONE, CompressionMethod.INT8, CompressionMethod.INT4,
                  CompressionMethod.QWD_INT4)
GRAD_METHODS = (CompressionMethod.NONE, CompressionMethod.INT8, CompressionMethod.INT4,
                CompressionMethod.INT4_HS, CompressionMethod.TLQ_HS)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    weights: CompressionMethod = CompressionMethod.NONE
    grads: CompressionMethod = CompressionMethod.NONE
    steps: int = 300
    batch_per_rank: int = 8
    lr: float = 5e-3
    seed: int = 0
    ranks_per_node: int = 2
    weight_group: int = WEIGHT_GROUP
    grad_group: int = GRAD_GROUP
    eval_batches: int = 4
    gpt: GPTConfig = field(default_factory=lambda: GPTConfig(vocab=32))

    def __post_init__(self) -> None:
        if self.weights not in WEIGHT_METHODS:
            raise DistscopeError(f"sharded-dp: weights={self.weights.value}; valid: "
                                 f"{', '.join(m.value for m in WEIGHT_METHODS)}")
        if self.grads not in GRAD_METHODS:
            raise DistscopeError(f"sharded-dp: grads={self.grads.value}; valid: "
                                 f"{', '.join(m.value for m in GRAD_METHODS)}")
        if self.steps <= 0 or self.batch_per_rank <= 0:
            raise DistscopeError(f"sharded-dp: steps={self.steps}, batch_per_rank={self.batch_per_rank} "
                                 "must be > 0")


def weight_quant_config(method: CompressionMethod, group: int) -> QuantConfig | None:
    if method is CompressionMethod.NONE:
        return None
    return QuantConfig(bits=8 if method is CompressionMethod.INT8 else 4, group_size=group)


def grad_quant_config(method: CompressionMethod, group: int) -> QuantConfig | None:
    """Gradients: stochastic rounding (unbiased sums), levels -7..7 for int4 (SDP4Bit)."""
    if method is CompressionMethod.NONE:
        return None
    return QuantConfig(bits=8 if method is CompressionMethod.INT8 else 4, group_size=group,
                       rounding=Rounding.STOCHASTIC,
                       hadamard=method in (CompressionMethod.INT4_HS, CompressionMethod.TLQ_HS))


def train_worker(rank: int, world: int, cfg: TrainConfig) -> dict[str, object]:
    """Run on every rank of an initialised gloo/nccl world; returns the loss curve and eval loss."""
    torch.manual_seed(cfg.seed)
    model = TinyGPT(cfg.gpt)
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    unit = world * math.lcm(cfg.weight_group, cfg.grad_group)
    p_pad = math.ceil(n_params / unit) * unit
    shard_n = p_pad // world
    model_flat = torch.zeros(p_pad)
    offset = 0
    for p in params:  # parameters become views of model_flat
        model_flat[offset : offset + p.numel()] = p.detach().reshape(-1)
        p.data = model_flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    master = torch.nn.Parameter(model_flat[rank * shard_n : (rank + 1) * shard_n].clone())
    opt = torch.optim.AdamW([master], lr=cfg.lr)
    w_cfg = weight_quant_config(cfg.weights, cfg.weight_group)
    g_cfg = grad_quant_config(cfg.grads, cfg.grad_group)
    groups = make_node_groups(cfg.ranks_per_node) if cfg.grads is CompressionMethod.TLQ_HS else None
    intra_cfg = QuantConfig(bits=8, group_size=cfg.grad_group, rounding=Rounding.STOCHASTIC)
    data = make_markov(cfg.gpt.vocab, seed=cfg.seed)
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        x, y = sample_batch(data, cfg.batch_per_rank, cfg.gpt.seq_len, seed=1 + step * world + rank)
        for p in params:
            p.grad = None
        loss = model(x, y)
        loss.backward()
        grad_flat = torch.zeros(p_pad)
        torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None], out=grad_flat[:n_params])
        if groups is not None and g_cfg is not None:
            shard_grad = tlq_hs_reduce_scatter(grad_flat, groups, intra_cfg, g_cfg)
        else:
            shard_grad = quantized_reduce_scatter(grad_flat, g_cfg)
        master.grad = shard_grad / world
        opt.step()
        with torch.no_grad():
            if cfg.weights is CompressionMethod.QWD_INT4:
                qwd_all_gather(master.detach(), model_flat, w_cfg)
            else:
                model_flat.copy_(all_gather_weights(master.detach(), w_cfg))
        dist.all_reduce(loss_t := loss.detach().clone())
        losses.append(loss_t.item() / world)
    train_s = time.perf_counter() - t0
    with torch.no_grad():
        evals = [model(*sample_batch(data, 32, cfg.gpt.seq_len, seed=10_000_000 + i)).item()
                 for i in range(cfg.eval_batches)]
    return {"losses": losses, "eval_loss": sum(evals) / len(evals), "train_s": train_s,
            "n_params": n_params, "p_pad": p_pad}
