"""Memory of one serving replica per GPU: weights, activation workspace, and the paged KV cache.

  weights      the largest stage's layers on one GPU (attention and dense FFN sharded tp ways, routed
               experts E/ep per GPU and sharded tp/ep ways) at the weight dtype with its block scales,
               norms and router in 16 bits, plus the vocab-parallel embedding (first stage) and LM head
               (last stage) in 16 bits
  workspace    FIXED_RESERVED_BYTES (CUDA context, NCCL/custom all-reduce buffers, CUDA graphs, cuBLAS
               workspace) + the activations of the largest iteration (max_batched_tokens tokens through
               the widest layer, two buffers alive) + fp32 logits of max_num_seqs rows
  KV budget    vLLM/SGLang: kv_fraction · M − weights − workspace; TensorRT-LLM: kv_fraction · (M −
               weights − workspace) (`kv_cache_free_gpu_mem_fraction` is a fraction of the free memory), with
               M the memory total the driver reports (Device.usable_bytes)
  KV blocks    budget // (L_s · kv_bytes_per_token_layer · block_tokens); a request holds
               ⌈(prompt + generated) / block_tokens⌉ blocks (PagedAttention, Kwon et al. SOSP'23)
"""

from __future__ import annotations

import dataclasses

from distscope.errors import DistscopeError
from distscope.serve.cost import kv_bytes_per_token_layer, stage_layers
from distscope.serve.layout import Layout
from distscope.serve.precision import ServePrecision, weight_bytes
from distscope.serve.stack import KvBudget, Stack
from distscope.system.device import Device, GiB
from distscope.workload.params import norm_params
from distscope.workload.spec import FfnKind, ModelSpec

# CUDA context (~0.5 GiB) plus communication buffers, CUDA graphs and library workspaces: vLLM logs its
# "non-torch memory" at 0.5-1.5 GiB on H100; 1 GiB is the middle.
FIXED_RESERVED_BYTES = 1.0 * GiB


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicaMemory:
    weights_bytes: float
    workspace_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token: float  # one token, all layers of the largest stage, one GPU
    block_tokens: int

    @property
    def kv_blocks(self) -> int:
        return int(self.kv_budget_bytes // (self.kv_bytes_per_token * self.block_tokens))

    @property
    def kv_tokens(self) -> int:
        return self.kv_blocks * self.block_tokens

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_tokens)

    def max_batch(self, tokens_per_request: int, max_num_seqs: int) -> int:
        """Requests of `tokens_per_request` (prompt + output) that fit at once, capped by the stack."""
        return min(max_num_seqs, self.kv_blocks // max(self.blocks_for(tokens_per_request), 1))

    @property
    def per_gpu_bytes(self) -> float:
        return self.weights_bytes + self.workspace_bytes + self.kv_budget_bytes


def weights_per_gpu_bytes(spec: ModelSpec, layout: Layout, prec: ServePrecision) -> float:
    tp, Ls = layout.tp, stage_layers(spec, layout.pp)
    h, d = spec.hidden, spec.dhead
    w, e16 = weight_bytes(prec.weights), prec.act16.bytes
    g_l = max(spec.kv_heads // tp, 1)
    up = 3 if spec.ffn is FfnKind.SWIGLU else 2
    if spec.mla is not None:
        m = spec.mla
        attn = (h * m.q_lora_rank + m.q_lora_rank * spec.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) / tp
                + h * (m.kv_lora_rank + m.qk_rope_head_dim)
                + m.kv_lora_rank * spec.heads * (m.qk_nope_head_dim + m.v_head_dim) / tp + spec.heads * m.v_head_dim * h / tp)
    else:
        attn = h * (spec.heads // tp) * d * 2 + 2 * h * g_l * d
    moe_frac = 0.0 if spec.moe is None else spec.moe_layers / spec.layers
    n_moe = round(Ls * moe_frac)
    n_dense = Ls - n_moe
    per_layer_16 = 2 * norm_params(spec)
    total = Ls * (attn * w + per_layer_16 * e16) + n_dense * up * h * spec.ffn_hidden / tp * w
    if n_moe:
        assert spec.moe is not None
        mo = spec.moe
        experts = mo.experts // layout.ep * up * h * mo.expert_ffn_hidden / layout.etp
        shared = mo.shared_experts * up * h * mo.expert_ffn_hidden / tp
        total += n_moe * ((experts + shared) * w + h * mo.experts * e16)
    vocab = -(-spec.vocab // tp) * h * e16
    total += vocab if layout.pp > 1 or spec.tied_embeddings else 2 * vocab
    return total


def workspace_bytes(spec: ModelSpec, layout: Layout, prec: ServePrecision, stack: Stack) -> float:
    tp, e = layout.tp, prec.act16.bytes
    widest = max(spec.hidden, (spec.heads // tp + 2 * max(spec.kv_heads // tp, 1)) * spec.dhead,
                 2 * (spec.ffn_hidden if spec.moe is None else spec.moe.expert_ffn_hidden * spec.moe.top_k) // tp)
    acts = 2 * stack.max_batched_tokens * (spec.hidden + widest) * e
    logits = stack.max_num_seqs * -(-spec.vocab // tp) * 4.0
    return FIXED_RESERVED_BYTES + acts + logits


def replica_memory(spec: ModelSpec, device: Device, layout: Layout, prec: ServePrecision, stack: Stack,
                   kv_fraction: float | None = None) -> ReplicaMemory:
    """Memory per GPU; raises when the weights do not fit (field and value named)."""
    weights = weights_per_gpu_bytes(spec, layout, prec)
    work = workspace_bytes(spec, layout, prec, stack)
    frac = stack.kv_fraction if kv_fraction is None else kv_fraction
    hbm = device.usable_bytes  # what the driver reports: the total vLLM's utilisation fraction and TRT-LLM's free memory start from
    if weights + work > frac * hbm:
        raise DistscopeError(
            f"model {spec.name} needs {weights / GiB:.1f} GiB of weights per GPU at {layout.label()} "
            f"(weights={prec.weights.value}) plus {work / GiB:.1f} GiB of workspace; {device.name} has "
            f"{hbm / GiB:.1f} GiB ({frac:.2f} usable): raise --tp/--pp or quantise the weights")
    budget = frac * hbm - weights - work if stack.kv_budget is KvBudget.OF_TOTAL else frac * (hbm - weights - work)
    kv_tok = stage_layers(spec, layout.pp) * kv_bytes_per_token_layer(spec, layout.tp, prec.kv)
    return ReplicaMemory(weights_bytes=weights, workspace_bytes=work, kv_budget_bytes=budget, kv_bytes_per_token=kv_tok,
                         block_tokens=stack.block_tokens)
