"""A small DLRM trained on N gloo ranks with table-wise sharded embeddings, its pooled-embedding
all-to-all optionally compressed by an error-bounded codec (compress/eb_codec.py): the convergence check
of issue 22 (final loss within 1% of the uncompressed run) and the source of real embedding tensors for
the codec measurements.

Model (DLRM, Naumov et al. 2019): bottom MLP over the dense features; T tables of `rows` x `dim`, pooled
by sum over `pooling` ids per sample; the bottom MLP's output and the T pooled vectors concatenated into
the top MLP; BCE loss. Table t lives on rank t % world (TorchRec's table-wise sharding). Each step every
rank pools its tables for all B = world·b samples, and an all-to-all sends rank q its b samples' rows
(the output distribution); the backward sends the gradients back the same way. With a codec, every
chunk that crosses ranks is encoded (forward; with `grads`, the backward too) within `bound` times its
value range (or `bound` absolute), its byte count exchanged
first, and the padded bytes all-to-all'ed. The dense part's gradients are averaged over ranks (DDP).

Data: synthetic click logs from a fixed random teacher of the same shape (its own embeddings and MLP
weights), so the loss has something to learn; every rank draws the same global batch per step from the
step's seed and uses its own b samples' dense features and labels.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from distscope.compress.eb_codec import EbCodec, decode, encode


@dataclasses.dataclass(frozen=True)
class DlrmTrainConfig:
    tables: int = 8
    rows: int = 2000
    dim: int = 16
    pooling: int = 3
    dense_in: int = 8
    bottom: tuple[int, ...] = (32, 16)
    top: tuple[int, ...] = (64, 32, 1)
    batch: int = 128  # per rank
    steps: int = 300
    lr: float = 0.05
    seed: int = 0
    codec: str | None = None  # an EbCodec value, or None for the uncompressed run
    bound: float = 1e-2  # error bound per element, relative to each chunk's value range
    relative: bool = True  # False: `bound` is absolute
    grads: bool = True  # compress the backward all-to-all too


def _mlp(sizes: list[int], final_sigmoid: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _batch(cfg: DlrmTrainConfig, world: int, step: int, teacher: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """The step's global batch (every rank draws the same): dense features, ids per table, labels."""
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step + 1)
    big_b = cfg.batch * world
    dense = torch.randn(big_b, cfg.dense_in, generator=g)
    ids = torch.randint(0, cfg.rows, (cfg.tables, big_b, cfg.pooling), generator=g)
    with torch.no_grad():
        logit = teacher["dense"](dense).squeeze(-1)
        for t in range(cfg.tables):
            logit += teacher["emb"][t][ids[t]].sum(dim=1) @ teacher["proj"][t]
        labels = torch.bernoulli(torch.sigmoid(logit), generator=g)
    return dense, ids, labels


def _teacher(cfg: DlrmTrainConfig) -> dict[str, Any]:
    g = torch.Generator().manual_seed(10_007 + cfg.seed)
    dense = nn.Linear(cfg.dense_in, 1)
    with torch.no_grad():
        dense.weight.copy_(torch.randn(1, cfg.dense_in, generator=g) * 0.5)
        dense.bias.zero_()
    return {"dense": dense,
            "emb": [torch.randn(cfg.rows, cfg.dim, generator=g) * 0.3 for _ in range(cfg.tables)],
            "proj": [torch.randn(cfg.dim, generator=g) * 0.3 for _ in range(cfg.tables)]}


def _exchange(chunks: list[np.ndarray], codec: EbCodec | None, bound: float, relative: bool, world: int,
              shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """All-to-all of float32 chunks (chunks[q] goes to rank q; shapes[r] is what rank r sends here), encoded
    when a codec is given. Returns what each rank sent here; sent and received bytes are counted."""
    rank = dist.get_rank()
    if codec is None:
        flat_in = [torch.from_numpy(np.ascontiguousarray(c, dtype=np.float32)).reshape(-1) for c in chunks]
        flat_out = [torch.empty(int(np.prod(s)), dtype=torch.float32) for s in shapes]
        dist.all_to_all(flat_out, flat_in)
        _COUNT["bytes"] += sum(4 * t.numel() for q, t in enumerate(flat_in) if q != rank)
        return [t.numpy().reshape(s) for t, s in zip(flat_out, shapes, strict=True)]
    bufs = [encode(c, codec, bound, relative=relative) if q != rank else b"" for q, c in enumerate(chunks)]
    sizes = torch.tensor([len(b) for b in bufs], dtype=torch.int64)
    recv_sizes = torch.empty(world, dtype=torch.int64)
    dist.all_to_all_single(recv_sizes, sizes)
    pad = int(torch.maximum(sizes.max(), recv_sizes.max()))
    top = torch.tensor([pad], dtype=torch.int64)
    dist.all_reduce(top, op=dist.ReduceOp.MAX)
    pad = int(top)
    send = torch.zeros(world, max(pad, 1), dtype=torch.uint8)
    for q, b in enumerate(bufs):
        if b:
            send[q, :len(b)] = torch.frombuffer(bytearray(b), dtype=torch.uint8)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    _COUNT["bytes"] += sum(len(b) for b in bufs)
    out = []
    for r in range(world):
        if r == rank:
            out.append(np.ascontiguousarray(chunks[r], dtype=np.float32).reshape(shapes[r]))
        else:
            out.append(decode(recv[r, :int(recv_sizes[r])].numpy().tobytes(), codec, shapes[r]))
    return out


_COUNT = {"bytes": 0}


class _OutputDist(torch.autograd.Function):
    """Pooled rows (B, n_mine, dim) -> this rank's b samples of every table (b, T, dim), and back."""

    @staticmethod
    def forward(ctx: Any, pooled: torch.Tensor, cfg: DlrmTrainConfig, world: int) -> torch.Tensor:
        rank, b = dist.get_rank(), cfg.batch
        owned = [len(range(r, cfg.tables, world)) for r in range(world)]
        codec = None if cfg.codec is None else EbCodec(cfg.codec)
        x = pooled.detach().numpy()
        got = _exchange([x[q * b:(q + 1) * b] for q in range(world)], codec, cfg.bound, cfg.relative, world,
                        [(b, owned[r], cfg.dim) for r in range(world)])
        out = torch.empty(b, cfg.tables, cfg.dim)
        for r in range(world):
            out[:, r::world] = torch.from_numpy(got[r])
        ctx.cfg, ctx.world, ctx.n_mine = cfg, world, owned[rank]
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        cfg, world = ctx.cfg, ctx.world
        codec = None if cfg.codec is None or not cfg.grads else EbCodec(cfg.codec)
        g = grad.contiguous()
        got = _exchange([g[:, q::world].numpy() for q in range(world)], codec, cfg.bound, cfg.relative, world,
                        [(cfg.batch, ctx.n_mine, cfg.dim)] * world)
        # each rank's loss is its own batch's mean: the tables see the mean over the global batch
        return torch.from_numpy(np.concatenate(got, axis=0)) / world, None, None


def train_worker(rank: int, world: int, cfg: DlrmTrainConfig) -> dict[str, Any]:
    """One rank of the run (compress/launch.run_gloo): rank 0 returns the global mean loss per step, the
    bytes its all-to-alls sent, and a pooled-embedding chunk and its gradient from the last step."""
    torch.manual_seed(cfg.seed)  # the same initial dense weights on every rank
    teacher = _teacher(cfg)
    bottom = _mlp([cfg.dense_in, *cfg.bottom])
    top = _mlp([cfg.bottom[-1] + cfg.tables * cfg.dim, *cfg.top])
    mine = list(range(rank, cfg.tables, world))
    gen = torch.Generator().manual_seed(cfg.seed + 97)
    bags = [nn.EmbeddingBag(cfg.rows, cfg.dim, mode="sum") for _ in range(cfg.tables)]
    with torch.no_grad():
        for bag in bags:
            bag.weight.normal_(0.0, 0.05, generator=gen)  # the same init everywhere; each rank keeps its own
    mine_params = [p for i in mine for p in bags[i].parameters()]
    dense_params = list(bottom.parameters()) + list(top.parameters())
    opt = torch.optim.Adagrad(dense_params + mine_params, lr=cfg.lr)
    b = cfg.batch
    losses: list[float] = []
    _COUNT["bytes"] = 0
    sample: dict[str, Any] = {}
    for step in range(cfg.steps):
        dense, ids, labels = _batch(cfg, world, step, teacher)
        pooled = torch.stack([bags[i](ids[i]) for i in mine], dim=1)  # (B, n_mine, dim)
        pooled.retain_grad()
        emb = _OutputDist.apply(pooled, cfg, world)
        x = torch.cat([bottom(dense[rank * b:(rank + 1) * b]), emb.reshape(b, -1)], dim=1)
        loss = nn.functional.binary_cross_entropy_with_logits(top(x).squeeze(-1), labels[rank * b:(rank + 1) * b])
        opt.zero_grad()
        loss.backward()
        for p in dense_params:
            assert p.grad is not None
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / world)
        if step == cfg.steps - 1 and pooled.grad is not None:
            sample = {"pooled": pooled.detach().numpy().copy(), "grad": pooled.grad.numpy().copy()}
    return {"losses": losses, "a2a_bytes": _COUNT["bytes"], **sample}
