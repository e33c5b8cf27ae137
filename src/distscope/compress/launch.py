"""Run a function on N local gloo ranks (spawned processes) with hard timeouts, and collect rank 0's result.

Workers are module-level functions `fn(rank, world, *args) -> picklable`; rank 0's return value is sent
back through a file. A worker that fails or a run that exceeds `timeout_s` raises RuntimeError, and all
workers are killed, so a bug never hangs CI.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, world: int, store_path: str, out_path: str, timeout_s: float, threads: int,
           fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    torch.set_num_threads(threads)
    # FileStore rendezvous in a private temp dir: no TCP port to pick, so no race with other jobs that
    # pick "free" ports on the same host
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
    try:
        result = fn(rank, world, *args)
        if rank == 0:
            Path(out_path).write_bytes(pickle.dumps(result))
        dist.barrier()  # no rank tears down while a peer still has collectives in flight
    finally:
        dist.destroy_process_group()
    # A clean worker leaves without interpreter finalization: gloo's C++ worker threads can still hold
    # tensors with Python references there, and destroying them then aborts the process ("terminate
    # called without an active exception", SIGABRT; pytorch/pytorch#179291). CI saw this on a rank
    # whose work had already succeeded. A failing worker still raises, so spawn reports its traceback.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_gloo(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 120.0,
             threads: int = 1) -> Any:
    """Spawn `world` gloo ranks running fn(rank, world, *args); return rank 0's result."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "result.pkl")
        store_path = os.path.join(tmp, "store")
        ctx = mp.start_processes(_entry, args=(world, store_path, out_path, timeout_s, threads, fn, args),
                                 nprocs=world, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gloo run of {fn.__name__} exceeded {timeout_s:.0f} s")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
        return pickle.loads(Path(out_path).read_bytes())
