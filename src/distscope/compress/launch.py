"""Run a function on N local gloo ranks (spawned processes) with hard timeouts, and collect rank 0's result.

Workers are module-level functions `fn(rank, world, *args) -> picklable`; rank 0's return value is sent
back through a file. A worker that fails or a run that exceeds `timeout_s` raises RuntimeError, and all
workers are killed, so a bug never hangs CI.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(rank: int, world: int, port: int, out_path: str, timeout_s: float, threads: int,
           fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
    try:
        result = fn(rank, world, *args)
        if rank == 0:
            Path(out_path).write_bytes(pickle.dumps(result))
    finally:
        dist.destroy_process_group()


def run_gloo(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 120.0,
             threads: int = 1) -> Any:
    """Spawn `world` gloo ranks running fn(rank, world, *args); return rank 0's result."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "result.pkl")
        ctx = mp.start_processes(_entry, args=(world, _free_port(), out_path, timeout_s, threads, fn, args),
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
