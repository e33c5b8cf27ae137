"""Work of one linear-recurrence mixer (Mamba-2, Gated DeltaNet) for one micro-batch on one GPU.

Both run as a chunked scan: the sequence is cut into chunks of Q tokens; within a chunk the mixer is a
masked, attention-like product over Q tokens, and chunks pass a fixed-size state (heads × key_dim ×
head_dim) from one to the next. Per token, with H value heads of width P (W = H·P), G key heads of width
N (K = G·N), all split tp ways (Megatron's MambaMixer shards heads and groups over TP):

  projections  in (T, (2W + 2K + gates)/tp, h): Mamba-2's z, x, B, C, dt; GDN's q, k, v, z, b, a
               out (T, h, W/tp)
  Mamba-2 SSD (Dao & Gu 2024, sec. 6, the chunked algorithm): intra-chunk C·Bᵀ per group (2·Q·N·G) and
               its masked product with X per head (2·Q·P·H); chunk states Bᵀ·X (2·N·P·H) and the output
               from the passed state C·S (2·N·P·H):      2·(Q·N·G + Q·P·H + 2·N·P·H)
  Gated DeltaNet (Yang et al. 2025; the delta rule's WY chunking, Yang et al. 2024 sec. 3.3, FLA's
               chunk_gated_delta_rule): per value head, Q·Kᵀ, K·Kᵀ and the WY keys W = A·K over the chunk
               (3·Q·N), the pseudo-values U = A·V and the masked product with them (2·Q·P), and the
               state terms W·S, Q·S and the update Kᵀ·(U − W·S) (3·N·P):  2·H·(3·Q·N + 2·Q·P + 3·N·P)
  element-wise the depthwise causal conv over (W + 2K)/tp channels (read + write) and the gated norm
               (y, z in, out: 3·W/tp), e bytes each

No kernel benchmark of either scan is in data/kernels (the Triton kernels of mamba_ssm and
flash-linear-attention). The scan is priced at the measured efficiency of causal attention over one
chunk, the work its intra-chunk step is, scaled from that attention's FLOPs to the scan's; the backward
at attention's 2.5x. `MISSING` names the gap where a verb prices one.
"""

from __future__ import annotations

from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model import fp8
from distscope.system.device import Device
from distscope.workload.spec import LinearMixer, MixerKind

MISSING = ("no kernel benchmark of the {kind} chunked scan in data/kernels: priced at the efficiency of causal "
           "attention over one {chunk}-token chunk")


def gemms(m: LinearMixer, T: float, h: int, tp: int) -> list[fp8.Linear]:
    """The input and output projections (module docstring); the input comes from a norm TE fuses the cast into."""
    return [(T, m.in_width / tp, h, True), (T, h, m.width / tp, False)]


def scan_flops(m: LinearMixer, T: float, tp: int) -> float:
    """Forward FLOPs of the chunked scan over T tokens on one of tp ranks (module docstring)."""
    Q, N, P = m.chunk, m.key_dim, m.head_dim
    H, G = m.heads / tp, max(m.key_heads / tp, 1.0)
    if m.kind is MixerKind.MAMBA2:
        return T * 2.0 * (Q * N * G + Q * P * H + 2 * N * P * H)
    return T * 2.0 * H * (3 * Q * N + 2 * Q * P + 3 * N * P)


def scan_s(m: LinearMixer, device: Device, dtype: DType, T: float, tp: int) -> tuple[float, float]:
    """(forward, backward) time of the chunked scan: causal attention over T/Q chunks of Q tokens per value
    head, at FlashAttention-2's measured efficiency (the reference curve: the scans are Triton kernels of
    their own, whatever attention backend the plan uses), scaled by the scan's FLOPs over the attention's
    (2·BH·Q²·(N + P)/2)."""
    Q, H = m.chunk, m.heads / tp
    problems = H * T / Q
    fwd, bwd = eff.flash_attention_s(device, dtype, problems, Q, Q, m.key_dim, m.head_dim, kernel="fa2")
    scale = scan_flops(m, T, tp) / (problems * Q * Q * (m.key_dim + m.head_dim))
    return fwd * scale, bwd * scale


def elementwise_bytes(m: LinearMixer, T: float, tp: int, e: float) -> float:
    """HBM bytes of the mixer's element-wise kernels per forward (module docstring)."""
    return T * e * (2 * (m.width + 2 * m.key_width) + 3 * m.width) / tp


def activation_bytes(m: LinearMixer, T: float, tp: int, e: float, gi: float) -> float:
    """What the mixer keeps for its backward per micro-batch: the input projection's input (gi·T·h is
    counted by the caller), its output (the conv's input), the conv's output (the scan's input), the scan's
    output, the gated norm's output (out_proj's input, gi bytes) and the chunk states (fp32 heads·N·P per
    chunk)."""
    states = 4.0 * m.heads * m.key_dim * m.head_dim / m.chunk
    return T * (e * (m.in_width + m.width + 2 * m.key_width + m.width) + gi * m.width + states) / tp
