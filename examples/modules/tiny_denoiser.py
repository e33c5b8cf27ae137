"""A small latent-diffusion denoiser in plain torch.nn (no diffusers): the layer kinds a Stable Diffusion
UNet block is made of (3x3 convolutions, group norms, self-attention over the latent's pixels,
cross-attention to text tokens), for trying `distscope serve diffusion` and for its tests:

    distscope serve diffusion --model torch:examples/modules/tiny_denoiser.py:denoiser \
        --input x:2x4x64x64:fp16,ctx:2x77x768:fp16 --gpus 1,2,4,8
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, ctx_dim: int | None = None) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(ctx_dim or dim, 2 * dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor | None = None) -> torch.Tensor:
        b, n, c = x.shape
        k, v = self.kv(x if ctx is None else ctx).chunk(2, dim=-1)
        q, k, v = (t.reshape(b, -1, self.heads, c // self.heads).transpose(1, 2) for t in (self.q(x), k, v))
        return self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    """Residual conv block, then a transformer block (self-attention, cross-attention, MLP)."""

    def __init__(self, ch: int, heads: int, ctx_dim: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(32, ch), nn.Conv2d(ch, ch, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(32, ch), nn.Conv2d(ch, ch, 3, padding=1)
        self.ln1, self.attn1 = nn.LayerNorm(ch), Attention(ch, heads)
        self.ln2, self.attn2 = nn.LayerNorm(ch), Attention(ch, heads, ctx_dim)
        self.ln3 = nn.LayerNorm(ch)
        self.mlp = nn.Sequential(nn.Linear(ch, 4 * ch), nn.GELU(), nn.Linear(4 * ch, ch))

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        x = x + self.conv2(F.silu(self.norm2(self.conv1(F.silu(self.norm1(x))))))
        b, c, h, w = x.shape
        t = x.flatten(2).transpose(1, 2)
        t = t + self.attn1(self.ln1(t))
        t = t + self.attn2(self.ln2(t), ctx)
        t = t + self.mlp(self.ln3(t))
        return t.transpose(1, 2).reshape(b, c, h, w)


class TinyDenoiser(nn.Module):
    def __init__(self, ch: int = 128, heads: int = 4, blocks: int = 2, ctx_dim: int = 768) -> None:
        super().__init__()
        self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
        self.blocks = nn.ModuleList(Block(ch, heads, ctx_dim) for _ in range(blocks))
        self.norm_out, self.conv_out = nn.GroupNorm(32, ch), nn.Conv2d(ch, 4, 3, padding=1)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x)
        for blk in self.blocks:
            h = blk(h, ctx)
        return self.conv_out(F.silu(self.norm_out(h)))


def denoiser() -> TinyDenoiser:
    return TinyDenoiser()
