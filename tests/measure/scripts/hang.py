"""Rank 3 never reaches the 3rd all_reduce (it is 'stuck' in a long sleep); the others must not hang."""

import time
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
t = torch.ones(1024)
for i in range(3):
    if dist.get_rank() == 3 and i == 2:
        time.sleep(60)
    dist.all_reduce(t)
dist.destroy_process_group()
