"""Orthonormal Hadamard transform over contiguous 32-element blocks (SDP4Bit's gradient smoothing).

H_32 / sqrt(32) is symmetric and orthogonal, so it is its own inverse: x = H (H x). Spreading an outlier
over its block shrinks the block's absmax, hence the quantization scale, for heavy-tailed gradients.
"""

from __future__ import annotations

import functools

import torch

HADAMARD_BLOCK = 32


@functools.lru_cache(maxsize=16)
def hadamard_matrix(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Sylvester construction H_{2k} = [[H, H], [H, -H]], scaled by 1/sqrt(n); n a power of two."""
    if n <= 0 or n & (n - 1):
        raise ValueError(f"hadamard size {n} must be a power of two")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / n**0.5).to(dtype=dtype, device=device)


def hadamard_blocks(x: torch.Tensor) -> torch.Tensor:
    """Apply H_32/sqrt(32) to each 32-block of the last dimension (its size must be a multiple of 32).
    Self-inverse: hadamard_blocks(hadamard_blocks(x)) == x up to rounding."""
    if x.shape[-1] % HADAMARD_BLOCK:
        raise ValueError(f"last dim {x.shape[-1]} is not a multiple of {HADAMARD_BLOCK}")
    h = hadamard_matrix(HADAMARD_BLOCK, x.dtype, str(x.device))
    return (x.reshape(-1, HADAMARD_BLOCK) @ h).reshape(x.shape)
