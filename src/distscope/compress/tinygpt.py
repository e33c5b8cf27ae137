"""A small GPT (pre-LN decoder, nanoGPT layout) and a deterministic generated token dataset, for measuring
compression error on real gradients/weights and for convergence runs. No download.

Dataset: a fixed random sparse order-2 Markov chain over `vocab` tokens (each context (a, b) allows
`branching` next tokens with Dirichlet weights), seeded; its entropy rate bounds the reachable loss,
so "the model learned" is visible as loss falling from ln(vocab) towards that floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from distscope.errors import DistscopeError


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    vocab: int = 64
    seq_len: int = 32
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise DistscopeError(f"gpt: d_model={self.d_model} not divisible by n_heads={self.n_heads}")


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.out = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape  # (batch, seq, d_model)
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, heads, t, d/heads)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@dataclass(frozen=True, kw_only=True)
class MarkovData:
    """Transition table (vocab, vocab, vocab) of next-token probabilities for context (a, b)."""

    probs: torch.Tensor
    vocab: int


def make_markov(vocab: int, branching: int = 4, seed: int = 0) -> MarkovData:
    g = torch.Generator().manual_seed(seed)
    probs = torch.zeros(vocab, vocab, vocab)
    allowed = torch.rand(vocab, vocab, vocab, generator=g).argsort(-1)[..., :branching]
    expo = -torch.log(torch.rand(vocab, vocab, branching, generator=g).clamp_min(1e-12))
    weights = expo / expo.sum(-1, keepdim=True)  # normalised Exp(1) draws = Dirichlet(1, ..., 1)
    probs.scatter_(2, allowed, weights)
    return MarkovData(probs=probs, vocab=vocab)


def sample_batch(data: MarkovData, batch: int, seq_len: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic batch for `seed`: (inputs, targets), each (batch, seq_len) int64."""
    g = torch.Generator().manual_seed(seed)
    toks = torch.empty(batch, seq_len + 1, dtype=torch.long)
    toks[:, :2] = torch.randint(data.vocab, (batch, 2), generator=g)
    for t in range(2, seq_len + 1):
        p = data.probs[toks[:, t - 2], toks[:, t - 1]]
        toks[:, t] = torch.multinomial(p, 1, generator=g).squeeze(1)
    return toks[:, :-1], toks[:, 1:]
