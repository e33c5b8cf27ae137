"""Memory a training framework allocates its own way, beyond the plan's tensors (Plan.framework).

The estimator's terms (model/memory.py, model/estimate.py `_stage_memory`) are framework-neutral; a
few allocations depend on how the framework writes its loss, its FSDP and its pipeline runtime. Each
is a field here, with the code it comes from. `Framework.ANY` and `MEGATRON` keep distscope's
Megatron-LM accounting; `TORCHTITAN` follows torchtitan@9dec370 (Dec 2024, the commit of its
published Llama 3.1 benchmarks, benchmarks/llama3_h100_202412_torchtitan.md) with the PyTorch of
the same date:
- loss (train.py `loss_fn`: `cross_entropy(pred.flatten(0, 1).float(), labels)`, not compiled,
  `del pred` before backward): forward holds the activation-dtype logits, their fp32 copy and the
  fp32 log-probabilities (e + 8 bytes per logit); backward holds the log-probabilities, the fp32
  gradient of the loss with respect to them and the fp32 gradient of the logits (12 bytes). With
  the vocabulary split over TP (torch loss_parallel, torch/distributed/tensor/parallel/loss.py
  `_log_softmax`), forward also holds the shifted logits and their exponential: e + 12 bytes.
  Megatron's vocab-parallel cross entropy works in place on one fp32 copy: distscope holds
  e + 4 bytes per logit through the last stage's backward and adds a 4-byte fp32 gradient at its peak.
  A stack running Transformer Engine's fused cross entropy (SoftwareProfile.fused_cross_entropy;
  transformer_engine/pytorch/cross_entropy.py @ v2.9: the forward's Triton kernel writes the gradient
  into the logits, which it saves; backward scales them in place) holds the e-byte logits alone.
- FSDP2 (torch.distributed.fsdp `fully_shard` with MixedPrecisionPolicy(param_dtype=bf16)): the
  sharded parameters are fp32 and are Adam's master copy (4 + 8 bytes per sharded parameter, where
  Megatron-FSDP keeps a bf16 shard beside the fp32 main parameters); the root module (embedding,
  final norm, LM head) is never resharded after forward (FSDP2 `_lazy_init`: "the parameters would
  be freed and all-gathered immediately"), so they stay gathered from forward to the end of backward.
- LM head input: the output projection keeps its input for the weight gradient, and the final norm
  keeps its own input (the last block's output, e·T·h·r). Under sequence parallelism Megatron's
  ColumnParallelLinear saves the local sequence shard and all-gathers it again in backward
  (megatron/core/tensor_parallel/layers.py `LinearWithGradAccumulationAndAsyncCommunication`:
  `ctx.save_for_backward(input, weight)` before the all-gather): e·T·h/t; torchtitan's DTensor
  ColwiseParallel output layer redistributes its input to Replicate before the matmul, whose autograd
  node saves the gathered tensor: e·T·h.
- torch.distributed.pipelining (stage.py `forward_one_chunk`): the last stage keeps every
  micro-batch's output (the logits, activation dtype) in `output_chunks` until the step returns.
"""

from __future__ import annotations

import dataclasses

from distscope.plan import Framework


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrameworkMemory:
    # logits copies (activation dtype, fp32) held on the last stage through its backward
    loss_held_act: int
    loss_held_fp32: int
    # extra copies at the loss's own peak (transient: gone before a recomputed layer is rebuilt)
    loss_peak_act: int
    loss_peak_fp32: int
    loss_parallel_peak_act: int  # more activation-dtype copies at the peak when the vocabulary is split over TP
    fsdp_fp32_shards: bool  # ZeRO-3 shards are fp32 and double as Adam's master weights
    fsdp_root_gathered: bool  # embedding, final norm and LM head stay gathered under ZeRO-3
    pipeline_keeps_outputs: bool  # the last stage keeps every micro-batch's logits until the step ends
    head_saves_gathered_input: bool  # the LM head keeps its all-gathered (not sequence-sharded) input under SP

    def head_input_bytes(self, tokens_hidden: float, e: float, tp: int, sp: bool) -> float:
        """Bytes the last stage keeps for the final norm and the LM head's backward, for `tokens_hidden`
        = T·h local token-features (module docstring)."""
        r = 1.0 / tp if sp else 1.0
        return tokens_hidden * e * (r + (1.0 if self.head_saves_gathered_input or not sp else r))

    def loss_bytes(self, logits: float, e: float, tp: int, fused: bool = False) -> tuple[float, float]:
        """(held, transient peak) bytes of the loss for `logits` local logits of e-byte activations; `fused`:
        Transformer Engine's fused cross entropy (SoftwareProfile.fused_cross_entropy), the logits alone."""
        if fused:
            return logits * e, 0.0
        held = logits * (self.loss_held_act * e + self.loss_held_fp32 * 4)
        act = self.loss_peak_act + (self.loss_parallel_peak_act if tp > 1 else 0)
        return held, logits * (act * e + self.loss_peak_fp32 * 4)


_MEGATRON = FrameworkMemory(loss_held_act=1, loss_held_fp32=1, loss_peak_act=0, loss_peak_fp32=1,
                            loss_parallel_peak_act=0, fsdp_fp32_shards=False, fsdp_root_gathered=False,
                            pipeline_keeps_outputs=False, head_saves_gathered_input=False)
# forward e + 8 (e + 12 with loss parallel), backward 12: the larger of the two (e = 2)
_TORCHTITAN = FrameworkMemory(loss_held_act=0, loss_held_fp32=0, loss_peak_act=0, loss_peak_fp32=3,
                              loss_parallel_peak_act=1, fsdp_fp32_shards=True, fsdp_root_gathered=True,
                              pipeline_keeps_outputs=True, head_saves_gathered_input=True)

FRAMEWORK_MEMORY: dict[Framework, FrameworkMemory] = {
    Framework.ANY: _MEGATRON,
    Framework.MEGATRON: _MEGATRON,
    Framework.TORCHTITAN: _TORCHTITAN,
}
