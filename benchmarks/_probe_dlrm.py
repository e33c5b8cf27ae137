"""device_probe's dlrm_step section: one GPU's DLRM training step, timed three ways.

MLPerf's DLRM (data/evidence/dlrm/mlperf_dlrm_v1.yaml: 26 one-hot tables of dim 128 at their full
Criteo 1TB sizes, 48 GB in fp16 as one joint table, bottom 13-512-256-128, dot interaction, top
480-1024-1024-512-256-1) written as a lean eager PyTorch step: a joint-table gather, the MLPs, the
pairwise dots (bmm and the lower triangle), BCE loss, backward, SGD on the MLPs (`_foreach_add_`) and the
sparse SGD update of the gathered rows (`index_add_`, as a sparse-gradient SGD applies it). fp16 weights
and activations (apex O2 style, without fp32 master weights). Ids are uniform within each table, so the
lookups get no help from Criteo's skew.

Each batch size (6,912: one GPU's share of 55,296 over 8 GPUs, as MLPerf's single-node runs) is timed
- `eager_wall_s`: the training loop as a user runs it (host issues op by op; synchronize at the end),
- `eager_gpu_s`: the same step behind a GPU spin (device_probe's timer): the kernels' time alone,
- `graph_s`: the whole step captured once as a CUDA graph and replayed (what CUDA-graphed HugeCTR runs),
and profiled once (3 eager steps): kernels per step and their device time, per kernel name, so
model/embedding_cost.py's terms and model/host.py's per-op host cost can be checked against it.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
LR = 0.01
# (table dtype, how the interaction's lower triangle is taken: advanced indexing, whose backward is a sorted
# index_put, or an index_select of the flattened dot products, whose backward is an index_add)
VARIANTS = ((torch.float16, "index"), (torch.float16, "select"), (torch.float32, "select"))


class _Dlrm:
    """The step's tensors and its eager training step (module docstring)."""

    def __init__(self, dev: str, smoke: bool, table_dtype: torch.dtype, pairs_by: str) -> None:
        spec = yaml.safe_load((ROOT / "data/evidence/dlrm/mlperf_dlrm_v1.yaml").read_text())
        self.rows = [min(int(t["rows"]), 1000) if smoke else int(t["rows"]) for t in spec["tables"]]
        self.dim = int(spec["tables"][0]["dim"])
        self.dev, self.dt = dev, torch.float16 if dev == "cuda" else torch.float32
        self.table = torch.empty(sum(self.rows), self.dim, device=dev, dtype=table_dtype).uniform_(-0.01, 0.01)
        self.pairs_by = pairs_by
        starts = torch.tensor([0, *self.rows[:-1]], device=dev).cumsum(0)
        self.starts, self.sizes = starts, torch.tensor(self.rows, device=dev)

        def mlp(widths: list[int], last_relu: bool) -> torch.nn.Sequential:
            layers: list[torch.nn.Module] = []
            for i, (a, b) in enumerate(itertools.pairwise(widths)):
                layers.append(torch.nn.Linear(a, b))
                if last_relu or i < len(widths) - 2:
                    layers.append(torch.nn.ReLU())
            return torch.nn.Sequential(*layers).to(dev, self.dt)

        n = len(self.rows) + 1
        self.li, self.lj = torch.tril_indices(n, n, offset=-1, device=dev)
        self.flat = self.li * n + self.lj
        pairs = n * (n - 1) // 2
        self.bottom = mlp([int(spec["dense_features"]), *spec["bottom_mlp"]], True)
        self.top = mlp([self.dim + pairs + 1, *spec["top_mlp"]], False)  # + 1: NVIDIA's pad to a multiple of 8
        self.params = [*self.bottom.parameters(), *self.top.parameters()]

    def batch(self, b: int) -> None:
        g = torch.Generator(device=self.dev).manual_seed(0)
        self.dense = torch.randn(b, 13, device=self.dev, dtype=self.dt, generator=g)
        u = torch.rand(b, len(self.rows), device=self.dev, generator=g)
        self.ids = ((u * self.sizes).long().clamp_max(self.sizes - 1) + self.starts).flatten()
        self.labels = (torch.rand(b, device=self.dev, generator=g) > 0.5).float()

    def step(self) -> torch.Tensor:
        for p in self.params:
            p.grad = None
        b = self.dense.shape[0]
        emb = self.table.index_select(0, self.ids).view(b, -1, self.dim).requires_grad_(True)
        x = self.bottom(self.dense)
        t = torch.cat([x.unsqueeze(1), emb.to(self.dt)], dim=1)
        zz = torch.bmm(t, t.transpose(1, 2))
        z = zz[:, self.li, self.lj] if self.pairs_by == "index" else zz.flatten(1).index_select(1, self.flat)
        top_in = torch.cat([x, z, z.new_zeros(b, 1)], dim=1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(self.top(top_in).squeeze(1).float(), self.labels)
        loss.backward()
        assert emb.grad is not None
        with torch.no_grad():
            torch._foreach_add_(self.params, [p.grad for p in self.params], alpha=-LR)
            self.table.index_add_(0, self.ids, emb.grad.view(-1, self.dim), alpha=-LR)  # dtype of the table
        return loss


def wall_s(dev: str, fn: Any, iters: int) -> float:
    """Seconds per call of a plain loop, synchronized once at the end (the host sets the pace if it is slower)."""
    for _ in range(3):
        fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def graph_s(fn: Any, iters: int) -> float:
    """Seconds per replay of `fn` captured as one CUDA graph (warm-up on a side stream, as torch.cuda.graph's
    docs do)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return wall_s("cuda", g.replay, iters)


def _profile(m: _Dlrm, dev: str) -> tuple[list[dict[str, Any]], float, float]:
    """Device time per step of each kernel name over 3 eager steps; the kernels' count and total per step."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if dev == "cuda" else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof:
        for _ in range(3):
            m.step()
        if dev == "cuda":
            torch.cuda.synchronize()
    out = []
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", 0.0) if dev == "cuda" else 0.0
        if us > 0 and not e.key.startswith(("aten::", "cuda", "Optimizer", "autograd::", "ProfilerStep")):
            out.append({"kernel": e.key[:200], "calls_per_step": e.count / 3, "us_per_step": us / 3})
    out.sort(key=lambda r: -r["us_per_step"])
    return out, sum(r["calls_per_step"] for r in out), sum(r["us_per_step"] for r in out)


def dlrm_step(dev: str, smoke: bool) -> list[dict[str, Any]]:
    from device_probe import timer

    t = timer(dev, 3, 5)
    rows: list[dict[str, Any]] = []
    for table_dtype, pairs_by in VARIANTS[:1] if smoke else VARIANTS:
        try:
            m = _Dlrm(dev, smoke, table_dtype if dev == "cuda" else torch.float32, pairs_by)
        except torch.OutOfMemoryError as e:  # the fp32 table (96 GB) on an 80 GB card
            rows.append({"table_dtype": str(table_dtype)[6:], "pairs_by": pairs_by, "error": str(e)[:200]})
            continue
        rows += _batches(m, dev, smoke, t)
        del m
        if dev == "cuda":
            torch.cuda.empty_cache()
    return rows


def _batches(m: _Dlrm, dev: str, smoke: bool, t: Any) -> list[dict[str, Any]]:
    """dlrm_step's rows of one variant, over the batch sizes."""
    rows: list[dict[str, Any]] = []
    for b in (64,) if smoke else ((6912, 13824, 27648, 55296) if m.pairs_by == "index" else (6912, 55296)):
        m.batch(b)
        row: dict[str, Any] = {"model": "mlperf-dlrm-v1", "batch": b, "dtype": str(m.dt).removeprefix("torch."),
                               "table_dtype": str(m.table.dtype).removeprefix("torch."), "pairs_by": m.pairs_by,
                               "table_rows": sum(m.rows), "eager_wall_s": wall_s(dev, m.step, 5 if smoke else 30),
                               "eager_gpu_s": t(m.step)}
        kernels, row["kernels_per_step"], us = _profile(m, dev)
        row["kernel_us_per_step"], row["top_kernels"] = us, kernels[:25]
        if dev == "cuda":
            try:
                row["graph_s"] = graph_s(m.step, 30)
            except Exception as e:  # a capture this build refuses: recorded, the eager figures stand
                row["graph_error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        print(f"  {row['table_dtype']} table, pairs by {m.pairs_by}, b={b}: eager {row['eager_wall_s'] * 1e3:.3f} ms, "
              f"kernels {row['eager_gpu_s'] * 1e3:.3f} ms "
              f"({row['kernels_per_step']:.0f} per step, {us / 1e3:.3f} ms profiled), graph "
              f"{row.get('graph_s', float('nan')) * 1e3:.3f} ms", flush=True)
    return rows


# gather_sweep: (table GiB, row dims) and lookups per call; the table is one buffer, viewed per dim and dtype
SWEEP_TABLE_GIB = (0.25, 1, 4, 16, 64)
SWEEP_DIMS = (64, 128, 256)
SWEEP_LOOKUPS = (180_000, 1_440_000)  # 26 one-hot tables at batch 6,912 and 55,296


def gather_sweep(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Random-row gathers (`index_select`, an embedding lookup's forward) and scatter-adds (`index_add_`, a
    sparse SGD update) of fp16 and fp32 rows over tables of 0.25-64 GiB: the rate a lookup reaches as the
    table outgrows the GPU's TLB reach and its caches. Ids uniform over the table; timed behind a GPU spin."""
    from device_probe import timer

    t = timer(dev, 3, 10)
    gib = 1 << 30
    sizes = (1 / 1024,) if smoke else SWEEP_TABLE_GIB
    buf = torch.zeros(int(max(sizes) * gib), device=dev, dtype=torch.uint8)
    g = torch.Generator(device=dev).manual_seed(0)
    rows = []
    for dtype in (torch.float16, torch.float32):
        for dim in (64,) if smoke else SWEEP_DIMS:
            table = buf.view(dtype).view(-1, dim)
            row_bytes = dim * table.element_size()
            for size in sizes:
                n_rows = int(size * gib) // row_bytes
                for n in (1000,) if smoke else SWEEP_LOOKUPS:
                    ids = torch.randint(0, n_rows, (n,), device=dev, generator=g)
                    src = torch.ones(n, dim, device=dev, dtype=dtype)
                    gather = t(lambda table=table, ids=ids: table.index_select(0, ids))
                    scatter = t(lambda table=table, ids=ids, src=src: table.index_add_(0, ids, src, alpha=-0.01))
                    moved = 2.0 * n * row_bytes  # rows read and written (gather), or read and read-modify-written
                    rows.append({"dtype": str(dtype)[6:], "dim": dim, "row_bytes": row_bytes, "table_gib": size,
                                 "lookups": n, "gather_s": gather, "index_add_s": scatter,
                                 "gather_GBps": moved / gather / 1e9, "index_add_GBps": 1.5 * moved / scatter / 1e9})
                    print(f"  {str(dtype)[6:]} dim {dim} table {size} GiB, {n} ids: gather "
                          f"{moved / gather / 1e9:.0f} GB/s, index_add {1.5 * moved / scatter / 1e9:.0f} GB/s",
                          flush=True)
    return rows
