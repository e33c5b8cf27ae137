"""How much of a GPU's memory a plan may use.

    capacity = min(usable, max_memory) · (1 − headroom)

usable: the memory total the driver reports (nvidia-smi `memory.total`, rocm-smi `VRAM Total Memory`),
  per device in data/devices.json with its source: e.g. 81,559 MiB = 79.6 GiB on an "80 GB" H100, not
  80 GiB. The estimator's own `workspace` term (model/memory.py, 2 GiB: CUDA context, NCCL buffers,
  cuBLAS workspace) is counted inside the plan's total.
max_memory: a user's cap (`--max-memory GiB`), e.g. to leave room for other processes.
headroom: a fraction kept free for what no per-tensor model sees: the caching allocator's
  fragmentation (reserved minus allocated; blocks of different segments never merge, so a pool holds
  split free blocks it cannot hand out — PyTorch "When does fragmentation occur in the CUDA caching
  allocator?"; its `memory_reserved()` is normally above `memory_allocated()`), NCCL's lazily created
  communicator buffers, and allocation spikes between the modelled peaks. The default, 5%, is a
  documented default, not a fit: at ~4 GiB on an 80 GB part it covers the CUDA context growth and
  NCCL buffers of large jobs beyond the 2 GiB workspace.
  Evidence (data/evidence/memory_runs.csv, tests/core/test_memory_validation.py): the model's tensors
  fall short of almost every published allocator peak: of Megatron-LM's peaks by up to 8.7% (one of
  8 over by 0.3%), of torchtitan's eager max-reserved peaks (expandable segments on) by 11.8-12.5%, and of its compiled
  FSDP+TP(+PP) runs by up to 28%. The 5% default plus the 2 GiB workspace (~7.5% of an 80 GB H100)
  covers most of the first, not the second: for torchtitan-like runs near capacity use `--headroom 0.15`.
"""

from __future__ import annotations

from distscope.errors import DistscopeError

DEFAULT_HEADROOM_FRAC = 0.05


def check_budget(max_memory_bytes: float | None, headroom_frac: float) -> None:
    if max_memory_bytes is not None and not max_memory_bytes > 0:
        raise DistscopeError(f"--max-memory={max_memory_bytes / 2**30:g} GiB must be > 0")
    if not 0.0 <= headroom_frac < 0.9:
        raise DistscopeError(f"--headroom={headroom_frac:g} must be a fraction in [0, 0.9)")


def capacity_bytes(usable_bytes: float, max_memory_bytes: float | None, headroom_frac: float) -> float:
    """Bytes per GPU a plan's modelled total may reach (see the module docstring)."""
    cap = usable_bytes if max_memory_bytes is None else min(usable_bytes, max_memory_bytes)
    return cap * (1.0 - headroom_frac)
