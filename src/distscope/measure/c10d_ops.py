"""Which torch.distributed dispatcher ops are communication, and which argument nccl-tests would count.

Every c10d collective and p2p call, whether issued from Python (`dist.all_reduce`), from C++
(DDP's Reducer calls `ProcessGroup::allreduce`, which dispatches `c10d::allreduce_`), by FSDP2
(`dist.all_gather_into_tensor` -> `c10d::_allgather_base_`) or by `torch.distributed.pipelining`
(`dist.isend`/`irecv` -> `c10d::send`/`c10d::recv_`), reaches one of the `c10d::` ops below through the
dispatcher. Schemas from torch 2.13 (`torch.ops.c10d.<name>.default._schema`).

The counted argument follows nccl-tests doc/PERFORMANCE.md: all_gather counts the gathered output,
reduce_scatter the full input, every other op the buffer the rank passes (for gather/scatter: the
per-rank contribution). Functional collectives (`_c10d_functional::`, used by DTensor and
torch.compile) are listed with their input argument; their all_gather output is input x group_size.
"""

from __future__ import annotations

import dataclasses

from distscope.comm.collective import Collective


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommOpSpec:
    """How to read one dispatcher op: its collective kind and the argument whose bytes count."""

    op: Collective
    counted_arg: str | None  # None: no payload (barrier)
    times_group_size: bool = False  # funcol all_gather: output = input x group_size
    functional: bool = False  # returns tensors completed by a later wait_tensor, not a Work


C10D_OPS: dict[str, CommOpSpec] = {
    "allreduce_": CommOpSpec(op=Collective.ALL_REDUCE, counted_arg="tensors"),
    "allreduce_coalesced_": CommOpSpec(op=Collective.ALL_REDUCE, counted_arg="tensors"),
    "allgather_": CommOpSpec(op=Collective.ALL_GATHER, counted_arg="output_tensors"),
    "_allgather_base_": CommOpSpec(op=Collective.ALL_GATHER, counted_arg="output_tensor"),
    "allgather_coalesced_": CommOpSpec(op=Collective.ALL_GATHER, counted_arg="output_lists"),
    "allgather_into_tensor_coalesced_": CommOpSpec(op=Collective.ALL_GATHER, counted_arg="outputs"),
    "reduce_scatter_": CommOpSpec(op=Collective.REDUCE_SCATTER, counted_arg="input_tensors"),
    "_reduce_scatter_base_": CommOpSpec(op=Collective.REDUCE_SCATTER, counted_arg="input_tensor"),
    "reduce_scatter_tensor_coalesced_": CommOpSpec(op=Collective.REDUCE_SCATTER, counted_arg="inputs"),
    "alltoall_": CommOpSpec(op=Collective.ALL_TO_ALL, counted_arg="input_tensors"),
    "alltoall_base_": CommOpSpec(op=Collective.ALL_TO_ALL, counted_arg="input"),
    "broadcast_": CommOpSpec(op=Collective.BROADCAST, counted_arg="tensors"),
    "reduce_": CommOpSpec(op=Collective.REDUCE, counted_arg="tensors"),
    "gather_": CommOpSpec(op=Collective.GATHER, counted_arg="input_tensors"),
    "scatter_": CommOpSpec(op=Collective.SCATTER, counted_arg="output_tensors"),
    "send": CommOpSpec(op=Collective.SEND, counted_arg="tensors"),
    "recv_": CommOpSpec(op=Collective.RECV, counted_arg="tensors"),
    "recv_any_source_": CommOpSpec(op=Collective.RECV, counted_arg="tensors"),
    "barrier": CommOpSpec(op=Collective.BARRIER, counted_arg=None),
    "monitored_barrier_": CommOpSpec(op=Collective.BARRIER, counted_arg=None),
}

FUNCTIONAL_OPS: dict[str, CommOpSpec] = {
    "all_reduce": CommOpSpec(op=Collective.ALL_REDUCE, counted_arg="input", functional=True),
    "all_reduce_": CommOpSpec(op=Collective.ALL_REDUCE, counted_arg="input", functional=True),
    "all_reduce_coalesced": CommOpSpec(op=Collective.ALL_REDUCE, counted_arg="inputs", functional=True),
    "all_reduce_coalesced_": CommOpSpec(op=Collective.ALL_REDUCE, counted_arg="inputs", functional=True),
    "all_gather_into_tensor": CommOpSpec(
        op=Collective.ALL_GATHER, counted_arg="input", times_group_size=True, functional=True
    ),
    "all_gather_into_tensor_out": CommOpSpec(
        op=Collective.ALL_GATHER, counted_arg="input", times_group_size=True, functional=True
    ),
    "all_gather_into_tensor_coalesced": CommOpSpec(
        op=Collective.ALL_GATHER, counted_arg="inputs", times_group_size=True, functional=True
    ),
    "reduce_scatter_tensor": CommOpSpec(op=Collective.REDUCE_SCATTER, counted_arg="input", functional=True),
    "reduce_scatter_tensor_out": CommOpSpec(
        op=Collective.REDUCE_SCATTER, counted_arg="input", functional=True
    ),
    "reduce_scatter_tensor_coalesced": CommOpSpec(
        op=Collective.REDUCE_SCATTER, counted_arg="inputs", functional=True
    ),
    "all_to_all_single": CommOpSpec(op=Collective.ALL_TO_ALL, counted_arg="input", functional=True),
    "broadcast": CommOpSpec(op=Collective.BROADCAST, counted_arg="input", functional=True),
    "broadcast_": CommOpSpec(op=Collective.BROADCAST, counted_arg="input", functional=True),
    "isend": CommOpSpec(op=Collective.SEND, counted_arg="tensor", functional=True),
    "irecv": CommOpSpec(op=Collective.RECV, counted_arg="tensor", functional=True),
}
