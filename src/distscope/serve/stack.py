"""Serving stacks (TensorRT-LLM, vLLM, SGLang, ...): the scheduler they run and their defaults.

A stack is software, so its numbers come from its own source and documentation, never from the
validation CSV:
- TensorRT-LLM ≥ 0.7: in-flight batching (a request's whole prompt joins the running decodes in one
  iteration), `max_batch_size` 256 and `max_num_tokens` 8192 (trtllm-build defaults), paged KV of
  `tokens_per_block` 64, `kv_cache_free_gpu_mem_fraction` 0.9 *of the memory left after the engine*.
  The C++ batch manager costs ~0.1 ms per iteration (TensorRT-LLM#13139 times the scheduler call in
  tens of µs); the HTTP front end (Triton/NIM) runs in other processes, overlapped with the GPU.
  Generation replays CUDA graphs; the XQA kernel reads each KV head once for its whole query group
  (release notes 0.7.1: "MMHA optimization for MQA and GQA", "FP8 KV cache support for XQA kernel").
- TensorRT-LLM ≤ 0.6 (`trtllm-0.6`): the same runtime before XQA — the masked-MHA generation kernel
  reads the KV cache once per *query* head (a/g times for GQA) — and with no CUDA graphs, so every
  iteration pays the engine's per-layer launch time (calibration.py).
- vLLM ≤ 0.5: prefill-prioritised scheduling (a prefill-only iteration of up to
  max(max_model_len, 2048) tokens whenever a waiting request fits), `max_num_seqs` 256, blocks of 16
  tokens, `gpu_memory_utilization` 0.9 *of total memory*. Its Python engine runs between GPU steps,
  serially: ~2.5 ms per scheduler iteration (vllm#4261) and per running sequence the output
  processing, detokenisation and streaming. The vLLM v0.6.0 blog (2024-09-05) profiles Llama 3 8B on
  one H100 under ShareGPT at 32 QPS as 38% GPU, 33% API server, 29% scheduling: at that load a
  decode step has ~256 sequences and ~12 ms of GPU work, so ~19.6 ms of CPU, i.e. ~67 µs per sequence
  on top of the 2.5 ms.
- vLLM 0.6 (`--num-scheduler-steps 10`, async output processing): the same CPU work, scheduled once
  per 10 steps and overlapped with the GPU (the blog's 2.7x throughput on 8B is the 1/0.38 of removing
  it); new requests join only at a 10-step boundary.
- SGLang 0.3: prefill-prioritised like vLLM with chunked prefill of 8192 tokens, a radix/token KV pool
  (page 1), `mem_fraction_static` 0.88 of total memory for weights + KV, a Python scheduler serial with
  the GPU (the overlap scheduler arrived in 0.4): ~1 ms per iteration and ~10 µs per sequence
  (assumed; the detokenizer runs in its own process).
- vLLM ≥ 0.8 (`vllm-v1`, the V1 engine): chunked prefill always on, a budget of 8192 tokens and 1024
  sequences on GPUs with >= 70 GB other than A100, else 2048 and 256 (vllm/engine/arg_utils.py
  defaults for the OpenAI server); the engine core's host work is small and per step (1 ms per
  iteration and 5 µs per sequence, assumed), serial with the GPU.
- SGLang ≥ 0.4 and TensorRT-LLM ≥ 1.0 overlap their schedulers with the GPU (SGLang's "zero-overhead"
  overlap scheduler, TensorRT-LLM's overlap scheduler in the PyTorch backend).
- chunked prefill (Sarathi-Serve, Agrawal et al. OSDI'24; vLLM `--enable-chunked-prefill`): decodes
  first, then prompt chunks fill a token budget of 512 per iteration.
- ideal: no CPU overhead, in-flight batching; a yardstick, not a product.
"""

from __future__ import annotations

import dataclasses
import enum
import re

from distscope.errors import DistscopeError, closest


class Policy(enum.Enum):
    """How an iteration is filled (one enum for the concept; the engine registers each)."""

    STATIC = "static"  # whole batch prefilled, then decoded to the end (gptSessionBenchmark)
    VLLM = "vllm"  # prefill-only iterations take priority; decodes wait (vLLM <= 0.5 default)
    INFLIGHT = "inflight"  # TRT-LLM in-flight batching: whole prompts join the running decodes
    CHUNKED = "chunked"  # Sarathi-Serve: decodes first, prompt chunks up to a token budget


class Launch(enum.Enum):
    """How an iteration outside a CUDA graph launches its kernels (calibration.py prices each)."""

    ENGINE = "engine"  # a TensorRT engine enqueued from C++
    EAGER = "eager"  # PyTorch eager ops dispatched from Python
    NONE = "none"  # no host launch cost (the `ideal` yardstick)


class KvBudget(enum.Enum):
    OF_TOTAL = "of_total"  # fraction of total memory, minus weights and activations (vLLM, SGLang)
    OF_FREE = "of_free"  # fraction of what is free after weights and activations (TensorRT-LLM)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stack:
    name: str
    policy: Policy
    max_num_seqs: int
    max_batched_tokens: int  # prompt tokens per iteration (chunk budget for CHUNKED)
    block_tokens: int
    kv_fraction: float
    kv_budget: KvBudget
    step_cpu_s: float  # CPU per scheduler iteration
    seq_cpu_s: float  # CPU per running sequence per iteration
    cpu_overlapped: bool  # CPU work hidden behind the GPU step (async engines, C++ runtimes)
    steps_per_schedule: int = 1  # vLLM multi-step scheduling
    custom_all_reduce: bool = True  # one-shot/two-shot NVLink all-reduce for small messages
    launch: Launch = Launch.EAGER
    decode_graphs: bool = True  # decode-only iterations replay a CUDA graph (no launch floor)
    gqa_grouped: bool = True  # decode attention reads each KV head once per query group
    reserve_full: bool = False  # admission reserves prompt + max output (no preemption ever)

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_batched_tokens < 1 or self.block_tokens < 1 or self.steps_per_schedule < 1:
            raise DistscopeError(f"stack {self.name}: max_num_seqs={self.max_num_seqs}, max_batched_tokens="
                                 f"{self.max_batched_tokens}, block_tokens={self.block_tokens} must be >= 1")
        if not 0 < self.kv_fraction <= 1:
            raise DistscopeError(f"stack {self.name}: kv_fraction={self.kv_fraction} must be in (0, 1]")

    def cpu_s(self, seqs: int) -> float:
        return (self.step_cpu_s + self.seq_cpu_s * seqs) / self.steps_per_schedule


_TRTLLM = Stack(name="trtllm", policy=Policy.INFLIGHT, max_num_seqs=256, max_batched_tokens=8192, block_tokens=64,
                kv_fraction=0.9, kv_budget=KvBudget.OF_FREE, step_cpu_s=1e-4, seq_cpu_s=1e-6, cpu_overlapped=False,
                launch=Launch.ENGINE, reserve_full=True)
_TRTLLM_06 = dataclasses.replace(_TRTLLM, name="trtllm-0.6", decode_graphs=False, gqa_grouped=False)
STACKS: dict[str, Stack] = {
    "trtllm": _TRTLLM,
    "trtllm-0.6": _TRTLLM_06,
    "vllm-0.5": Stack(name="vllm-0.5", policy=Policy.VLLM, max_num_seqs=256, max_batched_tokens=2048, block_tokens=16,
                      kv_fraction=0.9, kv_budget=KvBudget.OF_TOTAL, step_cpu_s=2.5e-3, seq_cpu_s=67e-6,
                      cpu_overlapped=False),
    "vllm": Stack(name="vllm", policy=Policy.VLLM, max_num_seqs=256, max_batched_tokens=2048, block_tokens=16,
                  kv_fraction=0.9, kv_budget=KvBudget.OF_TOTAL, step_cpu_s=2.5e-3, seq_cpu_s=67e-6,
                  cpu_overlapped=True, steps_per_schedule=10),
    "vllm-chunked": Stack(name="vllm-chunked", policy=Policy.CHUNKED, max_num_seqs=256, max_batched_tokens=512,
                          block_tokens=16, kv_fraction=0.9, kv_budget=KvBudget.OF_TOTAL, step_cpu_s=2.5e-3,
                          seq_cpu_s=67e-6, cpu_overlapped=True),
    "vllm-v1": Stack(name="vllm-v1", policy=Policy.CHUNKED, max_num_seqs=1024, max_batched_tokens=8192, block_tokens=16,
                     kv_fraction=0.9, kv_budget=KvBudget.OF_TOTAL, step_cpu_s=1e-3, seq_cpu_s=5e-6, cpu_overlapped=False),
    "sglang": Stack(name="sglang", policy=Policy.VLLM, max_num_seqs=1024, max_batched_tokens=8192, block_tokens=1,
                    kv_fraction=0.88, kv_budget=KvBudget.OF_TOTAL, step_cpu_s=1e-3, seq_cpu_s=10e-6,
                    cpu_overlapped=False),
    "ideal": Stack(name="ideal", policy=Policy.INFLIGHT, max_num_seqs=1024, max_batched_tokens=16384, block_tokens=16,
                   kv_fraction=0.95, kv_budget=KvBudget.OF_FREE, step_cpu_s=0.0, seq_cpu_s=0.0, cpu_overlapped=True,
                   launch=Launch.NONE, reserve_full=True),
}


def calibrated(stack: Stack) -> Stack:
    """The stack with the serving calibration's fitted values (the V0 vLLM engine's per-sequence CPU work)."""
    from distscope.serve import calibration

    if stack.name in ("vllm", "vllm-0.5", "vllm-chunked"):
        return dataclasses.replace(stack, seq_cpu_s=calibration.current().vllm_seq_cpu_s)
    return stack


def get_stack(name: str) -> Stack:
    key = name.strip().lower()
    if key not in STACKS:
        raise DistscopeError(f"--stack={name!r} is not a serving stack{closest(key, STACKS)}; valid: {', '.join(STACKS)}")
    return calibrated(STACKS[key])


def for_device(stack: Stack, usable_bytes: float, device_name: str) -> Stack:
    """vLLM V1's budget and sequence cap depend on the GPU (see the module doc)."""
    if stack.name == "vllm-v1" and (usable_bytes < 70e9 or device_name.startswith("a100")):
        return dataclasses.replace(stack, max_batched_tokens=2048, max_num_seqs=256)
    return stack


def stack_from_framework(framework: str) -> Stack:
    return calibrated(_from_framework(framework))


def _version(text: str, name: str) -> tuple[int, int] | None:
    m = re.search(name + r"\s*v?(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _from_framework(framework: str) -> Stack:
    """The stack a CSV `framework` cell names: 'TensorRT-LLM 0.6.1 ...', 'vLLM 0.5.4 ...', 'SGLang 0.3.0',
    'NVIDIA NIM 1.8.0 (... likely TensorRT-LLM)'. vLLM below 0.6 is `vllm-0.5`."""
    f = framework.lower()
    if "tensorrt-llm" in f or "trt-llm" in f or "trtllm" in f or "nim" in f:
        v = _version(f, "(?:tensorrt-llm|trt-llm|trtllm)")
        if v is not None and v < (0, 7):
            return _TRTLLM_06
        if v is not None and v >= (1, 0):
            return dataclasses.replace(_TRTLLM, cpu_overlapped=True)
        return _TRTLLM
    if "sglang" in f:
        v = _version(f, "sglang")
        return dataclasses.replace(STACKS["sglang"], cpu_overlapped=v is not None and v >= (0, 4))
    if "vllm" in f:
        v = _version(f, "vllm")
        if v is not None and v >= (0, 8):
            return STACKS["vllm-v1"]
        if "chunked" in f:
            return STACKS["vllm-chunked"]
        if v is not None and v < (0, 6):
            return STACKS["vllm-0.5"]
        steps = re.search(r"num-scheduler-steps\s*(\d+)", f)
        base = STACKS["vllm"]
        return dataclasses.replace(base, steps_per_schedule=int(steps.group(1)) if steps else 1)
    raise DistscopeError(f"framework={framework!r}: unknown serving stack; known: TensorRT-LLM, NIM, vLLM, SGLang")
