"""Worker functions for the 4-rank gloo tests (spawned by distscope.compress.launch.run_gloo).

Every rank regenerates every rank's input from its seed, so each check compares the collective's
output against a single-process reference computed locally.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from distscope.compress.collectives import (
    all_gather_weights,
    make_node_groups,
    quantized_reduce_scatter,
    qwd_all_gather,
    tlq_hs_reduce_scatter,
)
from distscope.compress.hooks import HookKind, register_hook
from distscope.compress.quantize import QuantConfig, Rounding, decode, encode
from distscope.compress.tinygpt import GPTConfig, TinyGPT, make_markov, sample_batch


def _data(r: int, n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + r)
    return (torch.randn(n, generator=g) * torch.rand(n, generator=g).pow(4) * 3).to(dtype)


def _rt(x: torch.Tensor, cfg: QuantConfig) -> torch.Tensor:
    """Single-process encode->decode of a 1-D tensor whose length is a multiple of the group size."""
    return decode(encode(x.reshape(1, -1), cfg), x.numel(), cfg)[0]


def reference_paths(rank: int, world: int) -> dict[str, bool]:
    """cfg=None paths vs the plain torch collectives: bit-identical, fp32 and bf16."""
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = _data(rank, 4 * 1000 + 12, dtype)
        plain = torch.empty(x.numel() // world, dtype=dtype)
        dist.reduce_scatter_tensor(plain, x)
        out[f"rs_{dtype}"] = torch.equal(plain, quantized_reduce_scatter(x, None))
        shard = x[:777]
        plain_ag = torch.empty(world * 777, dtype=dtype)
        dist.all_gather_into_tensor(plain_ag, shard)
        out[f"ag_{dtype}"] = torch.equal(plain_ag, all_gather_weights(shard, None))
        model = torch.zeros(world * 777, dtype=dtype)
        qwd_all_gather(shard, model, None)
        out[f"qwd_{dtype}"] = torch.equal(plain_ag, model)
    return out


def quantized_collectives(rank: int, world: int) -> dict[str, float]:
    """Max abs deviation of each quantized collective from its single-process simulation, and the
    relative L2 error vs the exact (unquantized) result."""
    res: dict[str, float] = {}
    n = 1000  # per-rank chunk, not a multiple of the group size (odd tail)
    xs = [_data(r, world * n) for r in range(world)]
    exact = sum(x.reshape(world, n)[rank] for x in xs)
    cfg4 = QuantConfig(bits=4, group_size=128)
    pad = cfg4.padded_len(n)

    def chunk(x: torch.Tensor, j: int) -> torch.Tensor:
        return torch.nn.functional.pad(x.reshape(world, n)[j], (0, pad - n))

    got = quantized_reduce_scatter(xs[rank], cfg4)
    ref = sum(_rt(chunk(x, rank), cfg4)[:n] for x in xs)
    res["rs_int4_vs_sim"] = (got - ref).abs().max().item()
    res["rs_int4_rel_l2"] = ((got - exact).norm() / exact.norm()).item()

    groups = make_node_groups(2)
    intra = QuantConfig(bits=8, group_size=128)
    inter = QuantConfig(bits=4, group_size=128, hadamard=True)
    got = tlq_hs_reduce_scatter(xs[rank], groups, intra, inter)
    node, local = divmod(rank, 2)
    partials = [sum(_rt(chunk(xs[m * 2 + l2], rank), intra) for l2 in range(2)) for m in range(2)]
    ref = sum(_rt(p, inter) for p in partials)[:n]
    res["tlq_vs_sim"] = (got - ref).abs().max().item()
    res["tlq_rel_l2"] = ((got - exact).norm() / exact.norm()).item()
    assert node in (0, 1) and local in (0, 1)

    # direct weight all-gather (qwZ) vs local dequant(quant(shard_j))
    cfgw = QuantConfig(bits=4, group_size=256)
    shards = [_data(50 + r, 999) for r in range(world)]
    got = all_gather_weights(shards[rank], cfgw)
    ref = torch.cat([_rt(torch.nn.functional.pad(s, (0, 1024 - 999)), cfgw)[:999] for s in shards])
    res["ag_int4_vs_sim"] = (got - ref).abs().max().item()
    full = torch.cat(shards)
    res["ag_int4_rel_l2"] = ((got - full).norm() / full.norm()).item()

    # qWD: start from identical copies, apply 5 small updates; copies must stay identical and track
    model = full.clone()
    truth = [s.clone() for s in shards]
    for step in range(5):
        truth = [t + 1e-2 * _data(1000 + 10 * step + r, 999) for r, t in enumerate(truth)]
        qwd_all_gather(truth[rank], model, cfgw)
    everyone = torch.empty(world * model.numel())
    dist.all_gather_into_tensor(everyone, model)
    res["qwd_copies_max_diff"] = (everyone.reshape(world, -1) - model).abs().max().item()
    t_full = torch.cat(truth)
    res["qwd_rel_l2"] = ((model - t_full).norm() / t_full.norm()).item()
    res["direct_rel_l2_same_weights"] = ((all_gather_weights(truth[rank], cfgw) - t_full).norm()
                                         / t_full.norm()).item()
    return res


def ddp_hooks(rank: int, world: int, steps: int) -> dict[str, float]:
    """Each hook in a real DDP TinyGPT: relative L2 error of the hooked mean gradient vs the exact mean."""
    cfg = GPTConfig(vocab=32, d_model=32, n_layers=1)
    data = make_markov(32)
    out: dict[str, float] = {}
    for kind in HookKind:
        torch.manual_seed(0)
        reference = TinyGPT(cfg)  # same init, no DDP: local gradients all-reduced for the exact mean
        torch.manual_seed(0)
        # one bucket (see bench.ddp_worker: PowerSGD + gloo + several buckets mis-order collectives)
        ddp = torch.nn.parallel.DistributedDataParallel(TinyGPT(cfg), bucket_cap_mb=256)
        register_hook(ddp, kind, int8_group=256)
        errs = []
        for step in range(steps):
            x, y = sample_batch(data, 4, cfg.seq_len, seed=step * world + rank)
            ddp.zero_grad()
            ddp(x, y).backward()
            hooked = torch.cat([p.grad.reshape(-1) for p in ddp.parameters()])
            reference.zero_grad()
            reference(x, y).backward()
            exact = torch.cat([p.grad.reshape(-1) for p in reference.parameters()])
            dist.all_reduce(exact)
            exact /= world
            errs.append(((hooked - exact).norm() / exact.norm()).item())
        out[kind.value] = max(errs[2:])  # PowerSGD all-reduces plainly until iteration 2
    return out


def stochastic_unbiased(rank: int, world: int) -> tuple[float, float]:
    """Mean over many stochastic int4 reduce-scatters approaches the exact sum (unbiasedness)."""
    cfg = QuantConfig(bits=4, group_size=128, rounding=Rounding.STOCHASTIC)
    x = _data(rank, world * 128)
    exact = torch.empty(128)
    dist.reduce_scatter_tensor(exact, x.clone())
    acc = torch.zeros(128)
    trials = 200
    for _ in range(trials):
        acc += quantized_reduce_scatter(x, cfg)
    one = quantized_reduce_scatter(x, cfg)
    rel = lambda y: ((y - exact).norm() / exact.norm()).item()  # noqa: E731
    return rel(one), rel(acc / trials)
