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
Block-scaled recipes (DeepSeek-V3 blockwise FP8, MXFP8, NVFP4: dtypes.Scaling) keep one scale per
`block` elements along the reduction dimension, so the copy a GEMM reads along the other dimension
(wgrad) cannot be a transpose of the first: both copies are quantized from the BF16 source, in one
pass that reads e and writes 2(f + s/B) (s = scale bytes, B = block; TE `MXFP8Quantizer` /
`Float8BlockQuantizer` with rowwise and columnwise usage). A fused producer writes the two copies
instead of e: + 2(f + s/B) - e. Weights use 2-D blocks where the recipe says so (128×128 blockwise,
16×16 NVFP4): s/B². NVFP4's per-tensor fp32 scale needs the source's amax before the cast, and its
random Hadamard transform of the wgrad operands a second amax: `Scaling.amax_reads` reads of e each.
Each function below is pure and returns bytes; the estimator prices them as element-wise passes.
"""

from __future__ import annotations

from collections.abc import Iterable

from distscope.dtypes import Precision, Scaling

# (M, N, K, fused) of one linear's forward GEMM (M×K)·(K×N): `fused` = its input comes from a norm or
# activation kernel TE fuses the FP8 cast into.
Linear = tuple[float, float, float, bool]

# weights scaled in 2-D blocks (elements per scale): DeepSeek-V3's 128×128, NVFP4's 16×16
_WEIGHT_BLOCK = {Scaling.BLOCKWISE: 128 * 128, Scaling.NVFP4: 16 * 16}


def resolve(precision: Precision, stack_current_scaling: bool) -> Scaling:
    """The recipe a run uses: plain `fp8` takes the stack's per-tensor recipe (delayed unless the
    software profile says current scaling)."""
    if precision.scaling is Scaling.STACK:
        return Scaling.CURRENT if stack_current_scaling else Scaling.DELAYED
    return precision.scaling


def _copies(f: float, scaling: Scaling, block: int, n: int = 2) -> float:
    """Bytes per element of `n` quantized copies (row-wise, and column-wise for the other GEMM) of one tensor."""
    return n * (f + (scaling.scale_bytes / block if block else 0.0))


def input_cast_bytes(linears: Iterable[Linear], e: float, f: float, scaling: Scaling,
                     non_tn: bool = False) -> float:
    """Forward: quantization of every linear's input (+ its second copy for wgrad), per micro-batch.
    `non_tn`: the device's FP8 GEMMs take any layout (TE `is_non_tn_fp8_gemm_supported`: sm_100 and
    up), so a per-tensor recipe keeps one copy and no transpose: e + f, or f - e fused."""
    amax = scaling.amax_reads * e
    total = 0.0
    for M, _, K, fused in linears:
        if scaling.block_scaled:
            per = _copies(f, scaling, scaling.block) - e if fused else e + _copies(f, scaling, scaling.block)
        elif non_tn:
            per = (f - e) if fused else (e + f)
        else:
            per = (3 * f - e) if fused else (e + 2 * f)
        total += M * K * (per + amax)
    return total


def grad_cast_bytes(linears: Iterable[Linear], e: float, f: float, scaling: Scaling, non_tn: bool = False) -> float:
    """Backward: quantization of every linear's output gradient dY (M×N) in both orientations (one
    copy for a per-tensor recipe on a `non_tn` device)."""
    n = 1 if non_tn and not scaling.block_scaled else 2
    per = e + _copies(f, scaling, scaling.block, n) + scaling.amax_reads * e
    return sum(M * N * per for M, N, _, _ in linears)


def weight_cast_bytes(params: float, e: float, f: float, scaling: Scaling, non_tn: bool = False) -> float:
    """Quantization of `params` weights in both orientations (per step when cached, else per micro-batch)."""
    block = _WEIGHT_BLOCK.get(scaling, scaling.block)
    n = 1 if non_tn and not scaling.block_scaled else 2
    return params * (e + _copies(f, scaling, block, n) + scaling.amax_reads * e)
