"""A small GPT-2-style model in plain torch, with optional hand-written Megatron tensor parallelism.

Shapes: tokens [b, s] -> embeddings [b, s, h] -> L blocks -> ln_f -> head [b, s, V].
Block: x + proj(attn(ln1(x))), then x + fc2(gelu(fc1(ln2(x)))). No buffers (causal attention via
`is_causal=True`), untied head, fp32 unless `dtype` says otherwise.

Tensor parallelism (Shoeybi et al. 2019, "Megatron-LM", Sec. 3): qkv and fc1 are column parallel
(output features split over tp ranks, heads split with them), proj and fc2 row parallel (input features
split; the partial sums are all-reduced, the bias added after). Operator f (identity forward, all-reduce
backward) sits before each column-parallel layer, operator g (all-reduce forward, identity backward)
after each row-parallel one: per block 2 all-reduces of [b, s, h] forward and 2 backward.
The word embedding and the head are vocab parallel (Megatron's VocabParallelEmbedding and
parallel LM head): each tp rank holds V/tp rows. Embedding: local lookup of the tokens in its range,
zeros elsewhere, then g (all-reduce [b, s, h] forward). Head: f, then local logits [b, s, V/tp], then the
vocab-parallel cross entropy, which all-reduces three [b*s] fp32 vectors forward (max logit, target
logit, sum of exponentials) and nothing backward. Position embeddings and layer norms stay replicated;
their gradients are identical on every tp rank because f's backward all-reduce hands every rank the
full gradient.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True, kw_only=True)
class GPTConfig:
    vocab: int = 126  # not a multiple of 4: FSDP pads the embedding and head rows (see comm_volume)
    seq_len: int = 16
    hidden: int = 32
    heads: int = 4
    layers: int = 4
    ffn_hidden: int = 128


class _CopyToTP(torch.autograd.Function):
    """f: identity forward, all-reduce of the input gradient backward."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[no-untyped-def, override]
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[no-untyped-def, override]
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        return grad, None


def _f(x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    return x if group is None else _CopyToTP.apply(x, group)


def _g(x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    return x if group is None else _ReduceFromTP.apply(x, group)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, tp_group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        tp = 1 if tp_group is None else dist.get_world_size(tp_group)
        if cfg.heads % tp or cfg.ffn_hidden % tp:
            raise ValueError(f"heads={cfg.heads} and ffn_hidden={cfg.ffn_hidden} must divide by tp={tp}")
        self.tp_group = tp_group
        self.local_heads = cfg.heads // tp
        self.head_dim = cfg.hidden // cfg.heads
        local_h = self.local_heads * self.head_dim
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.qkv = nn.Linear(cfg.hidden, 3 * local_h)  # column parallel: [h] -> [3 h/tp]
        self.proj = nn.Linear(local_h, cfg.hidden, bias=False)  # row parallel: [h/tp] -> [h]
        self.proj_bias = nn.Parameter(torch.zeros(cfg.hidden))
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.fc1 = nn.Linear(cfg.hidden, cfg.ffn_hidden // tp)  # column parallel
        self.fc2 = nn.Linear(cfg.ffn_hidden // tp, cfg.hidden, bias=False)  # row parallel
        self.fc2_bias = nn.Parameter(torch.zeros(cfg.hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        qkv = self.qkv(_f(self.ln1(x), self.tp_group))  # [b, s, 3 h/tp]
        q, k, v = qkv.view(b, s, 3, self.local_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, heads/tp, s, hd]
        a = a.transpose(1, 2).reshape(b, s, self.local_heads * self.head_dim)
        x = x + _g(self.proj(a), self.tp_group) + self.proj_bias
        m = self.fc2(F.gelu(self.fc1(_f(self.ln2(x), self.tp_group))))
        return x + _g(m, self.tp_group) + self.fc2_bias


def _vocab_range(vocab: int, tp_group: dist.ProcessGroup | None) -> tuple[int, int]:
    if tp_group is None:
        return 0, vocab
    tp, r = dist.get_world_size(tp_group), dist.get_rank(tp_group)
    if vocab % tp:
        raise ValueError(f"vocab={vocab} must divide by tp={tp}")
    return r * vocab // tp, (r + 1) * vocab // tp


class Embed(nn.Module):
    def __init__(self, cfg: GPTConfig, tp_group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.tp_group = tp_group
        self.start, self.end = _vocab_range(cfg.vocab, tp_group)
        self.tok = nn.Embedding(self.end - self.start, cfg.hidden)  # [V/tp, h]
        self.pos = nn.Embedding(cfg.seq_len, cfg.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        inside = (tokens >= self.start) & (tokens < self.end)
        e = self.tok((tokens - self.start).clamp(0, self.end - self.start - 1)) * inside.unsqueeze(-1)
        return _g(e, self.tp_group) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))


class Head(nn.Module):
    """Final norm and the (vocab-parallel) output layer; returns logits [b, s, V/tp]."""

    def __init__(self, cfg: GPTConfig, tp_group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.tp_group = tp_group
        start, end = _vocab_range(cfg.vocab, tp_group)
        self.ln_f = nn.LayerNorm(cfg.hidden)
        self.out = nn.Linear(cfg.hidden, end - start, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(_f(self.ln_f(x), self.tp_group))


class _VocabParallelCE(torch.autograd.Function):
    """Mean cross entropy over logits split on the vocab dim (Megatron tensor_parallel/cross_entropy.py)."""

    @staticmethod
    def forward(ctx, logits, target, group, start):  # type: ignore[no-untyped-def, override]
        logits = logits.float()  # [N, V/tp]
        vl = logits.shape[-1]
        m = logits.max(dim=-1).values
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
        logits = logits - m.unsqueeze(-1)
        outside = (target < start) | (target >= start + vl)
        local_t = (target - start).clamp(0, vl - 1)
        pred = logits.gather(-1, local_t.unsqueeze(-1)).squeeze(-1) * ~outside
        dist.all_reduce(pred, group=group)
        exp = logits.exp()
        sum_exp = exp.sum(dim=-1)
        dist.all_reduce(sum_exp, group=group)
        ctx.save_for_backward(exp / sum_exp.unsqueeze(-1), local_t, outside)
        return (sum_exp.log() - pred).mean()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        softmax, local_t, outside = ctx.saved_tensors
        g = softmax.clone()
        g[torch.arange(g.shape[0]), local_t] -= (~outside).float()
        return g * (grad / g.shape[0]), None, None, None


class GPT(nn.Module):
    """The full model, or (for pipeline stages) the slice of it [first_layer, last_layer)."""

    def __init__(
        self,
        cfg: GPTConfig,
        *,
        tp_group: dist.ProcessGroup | None = None,
        first_layer: int = 0,
        last_layer: int | None = None,
    ) -> None:
        super().__init__()
        last = cfg.layers if last_layer is None else last_layer
        self.embed = Embed(cfg, tp_group) if first_layer == 0 else None
        self.blocks = nn.ModuleList(Block(cfg, tp_group) for _ in range(first_layer, last))
        self.head = Head(cfg, tp_group) if last == cfg.layers else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x) if self.head is not None else x


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def tp_lm_loss(logits: torch.Tensor, targets: torch.Tensor, tp_group: dist.ProcessGroup, vocab: int) -> torch.Tensor:
    """Cross entropy for vocab-parallel logits [b, s, V/tp]."""
    start, _ = _vocab_range(vocab, tp_group)
    return _VocabParallelCE.apply(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), tp_group, start)
