"""Quantized collectives on torch.distributed process groups (gloo on CPU, nccl on GPU).

Every function takes `cfg=None` for the no-compression reference path, which calls the plain
collective itself and is therefore bit-identical to it.

- `all_gather_weights`: direct int4/int8 weight all-gather (ZeRO++ qwZ, Wang et al. 2023).
- `qwd_all_gather`: SDP4Bit qWD (Jia et al. 2024): gather the quantized difference between each rank's
  new weight shard and the shared model copy; everybody (sender included) adds the same dequantized
  difference, so all copies stay identical and the quantization error of one step is carried into
  the next difference (implicit error feedback).
- `quantized_reduce_scatter`: one-level all-to-all quantized reduce-scatter (ZeRO++ qgZ, one hop).
- `tlq_hs_reduce_scatter`: SDP4Bit TLq-HS: intra-node all-to-all at int8, dequantize+reduce,
  requantize at int4 with Hadamard smoothing, inter-node all-to-all, dequantize+reduce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from distscope.compress.quantize import QuantConfig, decode, encode
from distscope.errors import DistscopeError

ProcessGroup = dist.ProcessGroup


def _all_gather(out: torch.Tensor, inp: torch.Tensor, group: ProcessGroup | None) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(out, inp, group=group)


def _reduce_scatter(out: torch.Tensor, inp: torch.Tensor, group: ProcessGroup | None) -> None:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fn(out, inp, group=group)


def _pad_rows(x: torch.Tensor, length: int) -> torch.Tensor:
    # (R, L0) -> (R, length) zero-padded, float32
    return torch.nn.functional.pad(x.float(), (0, length - x.shape[1])) if length > x.shape[1] else x.float()


def all_gather_weights(shard: torch.Tensor, cfg: QuantConfig | None,
                       group: ProcessGroup | None = None) -> torch.Tensor:
    """1-D shard (same numel on every rank) -> flat (world * numel) in shard.dtype."""
    world = dist.get_world_size(group)
    n = shard.numel()
    if cfg is None:
        out = torch.empty(world * n, dtype=shard.dtype, device=shard.device)
        _all_gather(out, shard.reshape(-1).contiguous(), group)
        return out
    length = cfg.padded_len(n)
    wire = encode(_pad_rows(shard.reshape(1, -1), length), cfg)  # (1, B)
    gathered = torch.empty(world * wire.shape[1], dtype=torch.uint8, device=shard.device)
    _all_gather(gathered, wire.reshape(-1), group)
    rows = decode(gathered.reshape(world, -1), length, cfg)  # (world, length)
    return rows[:, :n].reshape(-1).to(shard.dtype)


def qwd_all_gather(new_shard: torch.Tensor, model_flat: torch.Tensor, cfg: QuantConfig | None,
                   group: ProcessGroup | None = None) -> None:
    """Update `model_flat` (world * shard numel, identical on all ranks) in place so that rank j's slice
    approximates rank j's `new_shard`. cfg=None: plain all-gather of the new shards."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    n = new_shard.numel()
    if model_flat.numel() != world * n:
        raise DistscopeError(f"qwd: model_flat has {model_flat.numel()} elements, expected {world}*{n}")
    if cfg is None:
        _all_gather(model_flat, new_shard.reshape(-1).to(model_flat.dtype).contiguous(), group)
        return
    view = model_flat.view(world, n)
    diff = new_shard.reshape(1, -1).float() - view[rank : rank + 1].float()
    length = cfg.padded_len(n)
    wire = encode(_pad_rows(diff, length), cfg)
    gathered = torch.empty(world * wire.shape[1], dtype=torch.uint8, device=new_shard.device)
    _all_gather(gathered, wire.reshape(-1), group)
    deltas = decode(gathered.reshape(world, -1), length, cfg)[:, :n]
    view.add_(deltas.to(model_flat.dtype))


def quantized_reduce_scatter(flat: torch.Tensor, cfg: QuantConfig | None,
                             group: ProcessGroup | None = None) -> torch.Tensor:
    """Sum-reduce-scatter of a flat tensor (numel divisible by world): rank r gets chunk r of the sum.
    Quantized path: quantize the world chunks, all-to-all, dequantize the received chunks, sum."""
    world = dist.get_world_size(group)
    if flat.numel() % world:
        raise DistscopeError(f"reduce-scatter: numel={flat.numel()} is not divisible by world={world}")
    n = flat.numel() // world
    if cfg is None:
        out = torch.empty(n, dtype=flat.dtype, device=flat.device)
        _reduce_scatter(out, flat.contiguous(), group)
        return out
    length = cfg.padded_len(n)
    wire = encode(_pad_rows(flat.reshape(world, n), length), cfg)  # (world, B)
    received = torch.empty_like(wire)
    dist.all_to_all_single(received, wire, group=group)
    return decode(received, length, cfg)[:, :n].sum(0).to(flat.dtype)


@dataclass(frozen=True, kw_only=True)
class NodeGroups:
    """Two-level layout of the default world: node n holds global ranks n*R .. n*R+R-1 (R ranks/node).
    `intra`: my node's ranks in local order; `inter`: the ranks with my local index, in node order."""

    world: int
    ranks_per_node: int
    intra: ProcessGroup
    inter: ProcessGroup

    @property
    def num_nodes(self) -> int:
        return self.world // self.ranks_per_node


def make_node_groups(ranks_per_node: int) -> NodeGroups:
    """Collective over the default world: every rank must call it, in the same order."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if ranks_per_node <= 0 or world % ranks_per_node:
        raise DistscopeError(f"tlq-hs: ranks_per_node={ranks_per_node} must divide world size {world}")
    nodes = world // ranks_per_node
    intra = inter = None
    for n in range(nodes):  # new_group is collective: create every group on every rank
        g = dist.new_group(ranks=[n * ranks_per_node + i for i in range(ranks_per_node)])
        if n == rank // ranks_per_node:
            intra = g
    for i in range(ranks_per_node):
        g = dist.new_group(ranks=[n * ranks_per_node + i for n in range(nodes)])
        if i == rank % ranks_per_node:
            inter = g
    assert intra is not None and inter is not None
    return NodeGroups(world=world, ranks_per_node=ranks_per_node, intra=intra, inter=inter)


def tlq_hs_reduce_scatter(flat: torch.Tensor, groups: NodeGroups, intra_cfg: QuantConfig,
                          inter_cfg: QuantConfig) -> torch.Tensor:
    """Two-level quantized sum-reduce-scatter over the default world (SDP4Bit TLq-HS).

    flat: (W*n,) with W = N nodes * R ranks/node; global rank g = node*R + local owns chunk g.
    1. view (N, R, n) -> send to local peer l the (N, n) chunks of ranks with local index l, at int8;
    2. receive R contributions (R, N*n), dequantize, sum -> node-partial sums (N, n);
    3. requantize at int4 (+Hadamard), all-to-all across nodes: row m goes to node m;
    4. receive N contributions (N, n), dequantize, sum -> my chunk (n,).
    """
    world, nodes, rpn = groups.world, groups.num_nodes, groups.ranks_per_node
    if flat.numel() % world:
        raise DistscopeError(f"tlq-hs: numel={flat.numel()} is not divisible by world={world}")
    n = flat.numel() // world
    length = math.lcm(intra_cfg.group_size, inter_cfg.group_size) * math.ceil(
        n / math.lcm(intra_cfg.group_size, inter_cfg.group_size))
    x = _pad_rows(flat.reshape(world, n), length).reshape(nodes, rpn, length)
    send = x.permute(1, 0, 2).reshape(rpn, nodes * length)  # row l: chunks of ranks (m, l), m = 0..N-1
    wire8 = encode(send, intra_cfg)
    recv8 = torch.empty_like(wire8)
    dist.all_to_all_single(recv8, wire8, group=groups.intra)
    partial = decode(recv8, nodes * length, intra_cfg).sum(0).reshape(nodes, length)
    wire4 = encode(partial, inter_cfg)
    recv4 = torch.empty_like(wire4)
    dist.all_to_all_single(recv4, wire4, group=groups.inter)
    return decode(recv4, length, inter_cfg).sum(0)[:n].to(flat.dtype)
