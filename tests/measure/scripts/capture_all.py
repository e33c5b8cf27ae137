"""Every comm API a program may use, under CommLogger (used directly); rank R dumps rank{R}.json."""

import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from distscope.measure import CommLogger

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank, n = dist.get_rank(), dist.get_world_size()
pairs = [dist.new_group([0, 3]), dist.new_group([1, 2])]
with CommLogger(dump_path=Path(sys.argv[1]) / f"rank{rank}.json", dims={"cp": [[0, 3], [1, 2]]}):
    mesh = init_device_mesh("cpu", (2, n // 2), mesh_dim_names=("dp", "tp"))
    x = torch.ones(256)  # 1 KiB of float32
    dist.all_reduce(x)
    out = torch.empty(256 * n)
    dist.all_gather_into_tensor(out, x)
    dist.reduce_scatter_tensor(torch.empty(64), x)
    dist.all_to_all_single(torch.empty(256), x)
    dist.broadcast(torch.ones(16, dtype=torch.bfloat16), src=0)
    works = dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, x, (rank + 1) % n), dist.P2POp(dist.irecv, torch.empty(256), (rank - 1) % n)]
    )
    for w in works:
        w.wait()
    dist.all_reduce(x, group=mesh.get_group("tp"), async_op=True).wait()
    y = funcol.all_reduce(torch.ones(8), "sum", mesh.get_group("dp"))
    torch.ops._c10d_functional.wait_tensor(y)
    d = distribute_tensor(torch.ones(4 * n, 4), mesh["tp"], [Shard(0)])
    d.redistribute(mesh["tp"], [Replicate()]).to_local()
    dist.all_reduce(torch.ones(8), group=pairs[0 if rank in (0, 3) else 1])  # labelled by the explicit map
    dist.barrier()
dist.destroy_process_group()
