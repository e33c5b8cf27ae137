"""Train the small GPT for a few steps on 4 ranks (gloo, CPU) under one parallel layout.

    torchrun --nproc-per-node 4 examples/train_gpt.py --layout ddp|fsdp|tp|pp [--steps 3]

Layouts (degrees fixed for 4 ranks):
- ddp:  DistributedDataParallel, dp=4.
- fsdp: FSDP2 `fully_shard` on every block, then on the root (ZeRO-3), dp=4.
- tp:   mesh (dp=2, tp=2); Megatron column/row parallel blocks, vocab-parallel embedding, head and
        cross entropy (see gpt.py), wrapped in DDP over dp.
- pp:   mesh (pp=2, dp=2); stage p holds layers [p L/2, (p+1) L/2), driven by
        torch.distributed.pipelining Schedule1F1B with `--microbatches` micro-batches. DDP cannot wrap a
        stage that runs several forwards before a backward (its bucket rebuild asserts), so the stage's
        gradients are flattened into one buffer and all-reduced over dp after the schedule, as DDP would
        (same bytes: the sum of the stage's gradient bytes).
Options for checking what-if predictions against real runs: `--sleep-rank R --sleep-ms MS` makes rank R a
straggler: it sleeps MS milliseconds before every forward (`--sleep-at step`), or (`--sleep-at backward`,
ddp only) when the gradient of its first layer -- the last one backward computes -- is ready, i.e. just
before its gradient all-reduce, while the other ranks wait in theirs (no rank computes during the sleep,
so the CPU share of the others does not change on an oversubscribed host). `--comm-hook fp16` (ddp only)
registers torch's fp16_compress_hook (gradients cast to fp16 for the all-reduce; torch's bf16 hook needs
NCCL).
Each rank draws its own batch of `--micro-batch * microbatches` sequences (the global batch is dp times
that). The script does no communication of its own (no loss all-reduce), so every byte a comm logger sees
comes from DDP, FSDP, pipelining or the TP layers.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from gpt import GPT, GPTConfig, lm_loss, tp_lm_loss
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layout", choices=["ddp", "fsdp", "tp", "pp"], required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=2, help="pp only: micro-batches per step")
    ap.add_argument("--timeout-s", type=float, default=60.0)
    ap.add_argument("--hidden", type=int, default=GPTConfig.hidden, help="model width (FFN 4x); larger: longer steps")
    ap.add_argument("--seq-len", type=int, default=GPTConfig.seq_len)
    ap.add_argument("--sleep-rank", type=int, default=-1, help="rank that sleeps before every forward")
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--sleep-at", choices=["step", "backward"], default="step")
    ap.add_argument("--comm-hook", choices=["none", "fp16"], default="none", help="ddp only: DDP comm hook")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: one GPU per rank (LOCAL_RANK) and NCCL instead of gloo")
    args = ap.parse_args()

    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device(args.device, torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", timeout=timedelta(seconds=args.timeout_s))
    torch.manual_seed(0)
    cfg = GPTConfig(hidden=args.hidden, ffn_hidden=4 * args.hidden, seq_len=args.seq_len)
    world = dist.get_world_size()
    rank = dist.get_rank()
    nmb = args.microbatches if args.layout == "pp" else 1
    gen = torch.Generator().manual_seed(1000 + rank)
    batch = args.micro_batch * nmb

    if args.layout == "ddp":
        mesh = init_device_mesh(args.device, (world,), mesh_dim_names=("dp",))
        model: torch.nn.Module = DDP(GPT(cfg).to(dev), process_group=mesh.get_group("dp"))
        if args.comm_hook == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook

            model.register_comm_hook(mesh.get_group("dp"), fp16_compress_hook)
        if rank == args.sleep_rank and args.sleep_at == "backward":
            model.module.embed.tok.weight.register_hook(lambda g: (time.sleep(args.sleep_ms / 1e3), g)[1])
    elif args.layout == "fsdp":
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(args.device, (world,), mesh_dim_names=("dp",))
        model = GPT(cfg).to(dev)
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif args.layout == "tp":
        mesh = init_device_mesh(args.device, (world // 2, 2), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(1 + mesh.get_local_rank("tp"))  # distinct shards per tp rank, equal over dp
        model = DDP(GPT(cfg, tp_group=mesh.get_group("tp")).to(dev), process_group=mesh.get_group("dp"))
    else:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        mesh = init_device_mesh(args.device, (2, world // 2), mesh_dim_names=("pp", "dp"))
        stage_idx = mesh.get_local_rank("pp")
        half = cfg.layers // 2
        torch.manual_seed(1 + stage_idx)
        stage_mod = GPT(cfg, first_layer=stage_idx * half, last_layer=(stage_idx + 1) * half).to(dev)
        stage = PipelineStage(stage_mod, stage_idx, 2, dev, group=mesh.get_group("pp"))
        schedule = Schedule1F1B(stage, n_microbatches=nmb, loss_fn=lm_loss)
        model = stage_mod

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        tokens = torch.randint(0, cfg.vocab, (batch, cfg.seq_len + 1), generator=gen).to(dev)
        x, y = tokens[:, :-1], tokens[:, 1:]
        opt.zero_grad()
        if rank == args.sleep_rank and args.sleep_at == "step":
            time.sleep(args.sleep_ms / 1e3)
        if args.layout == "pp":
            losses: list[torch.Tensor] = []
            if stage_idx == 0:
                schedule.step(x)
            else:
                schedule.step(target=y, losses=losses)
            loss = torch.stack(losses).mean() if losses else None
            grads = [p.grad for p in model.parameters()]
            flat = torch._utils._flatten_dense_tensors(grads)
            dist.all_reduce(flat, group=mesh.get_group("dp"))
            flat /= mesh.size(mesh.mesh_dim_names.index("dp"))
            for g, synced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads), strict=True):
                g.copy_(synced)
        elif args.layout == "tp":
            loss = tp_lm_loss(model(x), y, mesh.get_group("tp"), cfg.vocab)
            loss.backward()
        else:
            loss = lm_loss(model(x), y)
            loss.backward()
        opt.step()
        if loss is not None and os.environ.get("LOCAL_RANK", "0") in ("0", str(world - 1)):
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
