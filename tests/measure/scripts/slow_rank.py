"""Rank SLOW sleeps before each of its collectives; CommLogger (used directly) records the timings."""

import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from distscope.measure import CommLogger

SLOW, DELAY_S, N = int(sys.argv[2]), float(sys.argv[3]), 12
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank = dist.get_rank()
with CommLogger(dump_path=Path(sys.argv[1]) / f"rank{rank}.json"):
    t = torch.ones(4096)
    for _ in range(N):
        if rank == SLOW:
            time.sleep(DELAY_S)
        dist.all_reduce(t)
    out = torch.empty(4096 * dist.get_world_size())
    for _ in range(N):
        if rank == SLOW:
            time.sleep(DELAY_S)
        dist.all_gather_into_tensor(out, t)
dist.destroy_process_group()
