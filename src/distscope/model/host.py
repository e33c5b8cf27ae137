"""Host (CPU) time to issue one layer's kernels, and the floor it puts under the layer's GPU time.

An eager PyTorch training step is issued op by op from Python: each op costs host time (Python,
PyTorch's dispatcher, allocator calls, the CUDA launch) whether or not its kernel is long. When the
kernels are short, "the CPU kernel launch speed cannot keep up with the kernel execution speed on
GPU" (Megatron-LM, docs/discussions/deepseek-v3-gb200-optimization @7fec52c2: DeepSeek-V3 MXFP8 on
256 GB200 went from 494 to 970 TFLOPS/GPU, much of it by removing host work: router fusion 72 → 31
kernels, CUDA graphs, CPU binding). Dropless MoE adds a device→host sync in every MoE layer (the
dispatcher needs the tokens per expert on the host to size the expert GEMMs), so the host cannot run
ahead of the GPU across a layer: each layer's pass takes

    t_pass = max(t_gpu, t_host),    t_host = n_ops · t_op + n_expert_gemms · t_expert_gemm

(a dense layer has no sync, but a stack of identical layers is host-bound exactly when each of them
is, so the same per-layer max holds).

Counts per layer forward (backward issues twice the ops: data and weight gradients):
- n_ops: the transformer layer's own ops, DENSE_LAYER_OPS (norms, projections, rotary, attention,
  residuals: the ~12 kernels per layer of serve/calibration.py's eager launch floor, half in its attention
  block and half in its FFN block; a hybrid's mean layer (layer_ops) has attention_share attention blocks and
  linear_share linear mixers of MIXER_OPS each), one cast per
  linear layer under an FP8/FP4 recipe, and in an MoE layer the router's ROUTER_OPS (31 with
  Megatron's fused router, the GB200 study) and the dispatcher's DISPATCH_OPS.
- n_expert_gemms: Transformer Engine's GroupedLinear issues one cuBLASLt GEMM per local expert
  (multi-stream), each with its own host work: split sizes, per-expert quantized-tensor allocation
  (TransformerEngine issue #1499: torch.split and 2·num_gemms torch.empty per call), scale swizzles.
  Two per expert in the forward (fc1, fc2), four in the backward. PyTorch-native stacks
  (torch._grouped_mm) issue the grouped GEMM as one op.

t_op = 10 µs: the time PyTorch spends dispatching an op (the GB200 study: "a simple torch.empty ... will
generate a few microseconds of overhead on the host side"); serve/calibration.py's eager launch floor is
DENSE_LAYER_OPS of them per layer.
t_expert_gemm = 33 µs: TransformerEngine PR #3134's SM100 benchmark of the multi-stream cuBLASLt
grouped GEMM, 8 experts × 128 tokens at N = K = 2048, takes 0.267 ms with pre-swizzled operands,
while the same GEMMs in one CUTLASS launch take 0.069 ms: 33 µs per expert GEMM whose math is under
1 µs. cuDNN-frontend PR #924 measures the same order for one grouped-GEMM call's host submission on
SM100 (41-108 µs before its fix).
Under an FP8 / FP4 recipe every GEMM's host work doubles (LOW_PRECISION_HOST): Transformer Engine quantizes
each operand in kernels of its own, with scale bookkeeping, before the GEMM. TransformerEngine issue #761
measured it on a host-bound H100 model: "scheduling a te.Linear layer in FP8 takes more than 2x more time
compared to scheduling the te.Linear layer in BF16" (its forward: 140 ms FP8, 77 ms BF16). A dense layer
carries it as one cast op per linear layer (its linears are one op each); a multi-stream grouped GEMM
quantizes every expert's operands separately, so each expert GEMM's host time doubles.
"""

from __future__ import annotations

import dataclasses

from distscope.system.device import Device
from distscope.workload.spec import ModelSpec

# host seconds per eager PyTorch op (module docstring)
OP_S = 10e-6
# What an eager module's host floor (OP_S per traced op) leaves out, for the verbs that price one: the host time
# of the model's own Python code around each op, which depends on that code, so no one figure prices it
# (data/device/README.md, the 2026-11-27 sessions: eager diffusers UNets on H100 and H200 hosts).
EAGER_MODULE_NOTE = (f"eager host time is priced at {OP_S * 1e6:.0f} us per traced op (a bare op loop's) unless "
                     "--host-op-us says otherwise; model code adds its own: diffusers' UNets measured 38-67 us per "
                     "traced op eager on H100 and H200 hosts (SD 1.5: 37-46 ms a call against 12 ms of kernels)")
# host seconds per expert GEMM of Transformer Engine's multi-stream GroupedLinear (module docstring)
EXPERT_GEMM_S = 33e-6
# host work of a GEMM under an FP8 / FP4 recipe over BF16 (module docstring: TransformerEngine issue #761)
LOW_PRECISION_HOST = 2.0
# ops of one transformer layer's forward outside its MoE block (serve/calibration.py: ~12 per layer)
DENSE_LAYER_OPS = 12
# ops of one linear mixer's forward (mamba_ssm's Mamba2 as Megatron's MambaMixer runs it; FLA's Gated DeltaNet
# alike): norm, in_proj, causal conv1d, the chunked scan's five Triton kernels (chunk cumsum, chunk state,
# state passing, chunk bmm, chunk scan), gated norm, out_proj and the residual
MIXER_OPS = 12
# Megatron's fused MoE router (--moe-router-fusion): 31 kernels (the GB200 study, sec. 2.1.4)
ROUTER_OPS = 31
# Megatron's all-to-all dispatcher around the experts: token counts, their all-to-all and the D2H
# sync, permute, dispatch all-to-all, chunk sort; and the mirror image on the way back
DISPATCH_OPS = 12


def op_s(device: Device) -> float:
    """Host seconds per eager op for `device`: the --host-op-us the user gave (Device.host_op_s), else OP_S."""
    return OP_S if device.host_op_s is None else device.host_op_s


@dataclasses.dataclass(frozen=True, slots=True)
class HostWork:
    """What one layer's forward issues from the host."""

    ops: float  # eager PyTorch ops (a hybrid's mean layer: fractional)
    expert_gemms: int  # per-expert GEMMs of a multi-stream grouped GEMM
    expert_gemm_s: float = EXPERT_GEMM_S  # host time of each (LOW_PRECISION_HOST times more under FP8 / FP4)
    op_s: float = OP_S  # host time of each op (op_s(device))

    def forward_s(self) -> float:
        """t_host of the forward pass (module docstring)."""
        return self.ops * self.op_s + self.expert_gemms * self.expert_gemm_s

    def backward_s(self) -> float:
        """t_host of the backward pass: data and weight gradients, twice the forward's ops."""
        return 2.0 * self.forward_s()

    def forward_pass_s(self, gpu_experts_s: float, gpu_rest_s: float) -> float:
        """One forward pass of the layer with the host in the loop. After the MoE sync the GPU is idle
        until the host issues the experts' GEMMs, and the rest of the layer (combine, the next
        layer's attention, router and dispatch up to its sync) follows them in issue order, so

            t = max(H_e + max(H_r, G_r), G_e + G_r)

        (H host, G GPU; e the experts' phase, r the rest): the experts' host time is exposed when it
        exceeds their GPU time, and the rest overlaps as far as the GPU is behind. Without experts
        it is max(H, G)."""
        h_e, h_r = self.expert_gemms * self.expert_gemm_s, self.ops * self.op_s
        return max(h_e + max(h_r, gpu_rest_s), gpu_experts_s + gpu_rest_s)


def layer_host_work(*, moe_layer: bool, linears: float, low_precision: bool, local_experts: int,
                    per_expert_gemms: bool, op_s: float = OP_S, layer_ops: float = DENSE_LAYER_OPS) -> HostWork:
    """The host work of one layer's forward: `linears` linear layers (each cast under a low-precision
    recipe), the router and dispatcher in an MoE layer, and `local_experts` experts' two GEMMs each
    when the grouped GEMM issues one GEMM per expert (Transformer Engine; LOW_PRECISION_HOST times the
    host time each under a low-precision recipe), else one op for each of the two grouped GEMMs."""
    ops = layer_ops + (linears if low_precision else 0)
    gemms = 0
    if moe_layer:
        ops += ROUTER_OPS + DISPATCH_OPS
        if per_expert_gemms:
            gemms = 2 * local_experts
        else:
            ops += 2
    return HostWork(ops=ops, expert_gemms=gemms,
                    expert_gemm_s=EXPERT_GEMM_S * (LOW_PRECISION_HOST if low_precision else 1.0), op_s=op_s)


def layer_ops(spec: ModelSpec) -> float:
    """A layer's own ops (module docstring): DENSE_LAYER_OPS, or for a hybrid half of them per attention
    block and per FFN block and MIXER_OPS per linear mixer."""
    return DENSE_LAYER_OPS / 2 * (1 + spec.attention_share) + MIXER_OPS * spec.linear_share


def linear_layers(spec: ModelSpec, moe_layer: bool) -> float:
    """Linear layers of one layer's forward (model/layer.py's shapes): QKV and output projections (MLA:
    five) per attention mixer, in and out projections per linear mixer, and fc1/fc2 of the MLP, or of the
    routed experts plus any shared experts (and LatentMoE's two projections)."""
    if (ca := spec.compressed_attention) is not None:  # DeepSeek-V4: five, a compressor in CSA / HCA, an indexer's 3
        n = 5.0 + (ca.sparse_layers * 4 + ca.heavy_layers) / spec.layers
    else:
        n = (5 if spec.mla is not None else 2) * spec.attention_share + 2 * spec.linear_share
    if moe_layer and spec.moe is not None:
        n += (2 if spec.moe.shared_experts else 0) + (2 if spec.moe.latent else 0)
    return n + 2
