"""Gloo workers for tests/measure/test_algo_choice.py (module-level: spawned ranks import them)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from distscope.comm.collective import Collective
from distscope.measure.algo_choice import CANDIDATES, ChoiceTable, Dispatcher, ddp_hook, measure_table


def candidates_agree(rank: int, world: int) -> dict[str, float]:
    """Every candidate's result against gloo's own op, per op and size: the largest abs difference."""
    out: dict[str, float] = {}
    for op, impls in CANDIDATES.items():
        for numel in (world, 1000 * world):
            g = torch.Generator().manual_seed(rank * 7 + numel)
            n_in = numel // world if op is Collective.ALL_GATHER else numel
            x = torch.randn(n_in, generator=g)
            ref = torch.empty(numel // world if op is Collective.REDUCE_SCATTER else numel)
            CANDIDATES[op]["gloo"](ref, x)
            for name, impl in impls.items():
                y = torch.empty_like(ref)
                impl(y, x)
                out[f"{op.value}:{name}:{numel}"] = float((y - ref).abs().max())
    return out


def dispatch_and_ddp(rank: int, world: int) -> dict[str, object]:
    """A measured table, the dispatcher's choices over sizes, and DDP trained through its hook against
    DDP's own all-reduce (same init and batches)."""
    table = measure_table([1 << 10, 1 << 16], iters=3, warmup=1)
    d = Dispatcher(table)
    for numel in (world * 8, world * 4096):
        t = torch.ones(numel)
        d.all_reduce(t)
        assert torch.allclose(t, torch.full((numel,), float(world)))
    torch.manual_seed(0)
    results = []
    for hooked in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        if hooked:
            ddp.register_comm_hook(None, ddp_hook(Dispatcher(table)))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(5):
            x = torch.randn(32, 16, generator=g)
            loss = ddp(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        results.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    diff = float((results[0] - results[1]).abs().max())
    dist.barrier()
    return {"table": table.to_dict(), "calls": d.calls, "ddp_max_diff": diff,
            "roundtrip": ChoiceTable.from_dict(table.to_dict()) == table}
