"""FP8 training as Transformer Engine executes it: the extra memory traffic around FP8 GEMMs.

With `--precision fp8` the linear layers' three GEMMs run in FP8 (fprop Y = X·Wᵀ, dgrad dX = dY·W,
wgrad dW = dYᵀ·X: TE `Linear`, `LayerNormLinear`, `LayerNormMLP`, `GroupedLinear`), with BF16
outputs and FP32 weight-gradient accumulation. Everything else stays in BF16: attention (unless FP8
attention is chosen: TE `DotProductAttention` with `fp8_dpa`), norms, activations, residuals, the
embedding and the LM head (Megatron's output layer is not a TE FP8 module), and the TP/PP/DP traffic
of activations and gradients.

Hopper's FP8 tensor cores take only the "TN" layout, so each FP8 operand is needed both as is and
transposed: TE casts with fused cast-transpose kernels (transformer_engine/pytorch/cpp_extensions/
transpose.py `fp8_cast_transpose_fused`; `fp8_transpose` after a fused norm/activation). Bytes per
element (e = BF16 activation bytes, f = FP8 bytes), each pass reading its input once and writing its
outputs once:
- a linear input produced by a plain kernel (attention output into the projection, permuted tokens
  into MoE experts): cast-transpose reads e and writes f + f              -> e + 2f   (= 4)
- a linear input produced by a norm or activation TE fuses with the cast (`layernorm_fwd_fp8`,
  `gelu`/`swiglu` with FP8 output in LayerNormMLP): the producer writes f instead of e, then the
  transpose for wgrad reads f and writes f                                 -> 3f - e   (= 1)
- every output gradient dY (backward): cast-transpose (fused with bias-grad/dgelu)  -> e + 2f
- weights: cast and transpose each weight (read e, write f + f) once per optimizer step when TE
  caches FP8 weights across micro-batches (Megatron passes `is_first_microbatch`), else once per
  micro-batch (torchao Float8Linear)                                       -> e + 2f per parameter
- current (per-tensor, just-in-time) scaling first reads each tensor for its amax: + e per cast
  element; delayed scaling instead keeps an amax history, updated for all tensors by one fused kernel
  per forward and per backward (`amax_and_scale_update`), plus one small all-reduce of the amaxes.
Each function below is pure and returns bytes; the estimator prices them as element-wise passes.
"""

from __future__ import annotations

from collections.abc import Iterable

# (M, N, K, fused) of one linear's forward GEMM (M×K)·(K×N): `fused` = its input comes from a norm or
# activation kernel TE fuses the FP8 cast into.
Linear = tuple[float, float, float, bool]


def input_cast_bytes(linears: Iterable[Linear], e: float, f: float, current_scaling: bool) -> float:
    """Forward: FP8 cast (+ transpose for wgrad) of every linear's input, per micro-batch."""
    total = 0.0
    for M, _, K, fused in linears:
        total += M * K * ((3 * f - e) if fused else (e + 2 * f))
        if current_scaling:
            total += M * K * e  # amax pass
    return total


def grad_cast_bytes(linears: Iterable[Linear], e: float, f: float, current_scaling: bool) -> float:
    """Backward: cast-transpose of every linear's output gradient dY (M×N), per micro-batch."""
    return sum(M * N * (e + 2 * f + (e if current_scaling else 0.0)) for M, N, _, _ in linears)


def weight_cast_bytes(params: float, e: float, f: float) -> float:
    """Cast + transpose of `params` weights to FP8 (per step when cached, else per micro-batch)."""
    return params * (e + 2 * f)


# Kernels per micro-batch for delayed-scaling bookkeeping (one fused amax/scale update in forward and
# one in backward), counted per stage rather than per layer.
SCALE_UPDATE_KERNELS = 2
