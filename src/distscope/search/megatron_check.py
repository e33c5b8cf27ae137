"""Check Megatron-LM arguments against the argument list of a pinned Megatron-LM commit.

data/megatron_args.json holds every option of megatron/training/arguments.py's parser (option
strings, action, type, choices), dumped from the real parser at the commit it names. The emitted
arguments are parsed by an argparse parser rebuilt from it (unknown flag, wrong type, bad choice,
missing value all fail), then checked against the validate_args rules distscope's plans can touch.
"""

from __future__ import annotations

import argparse
import functools
import json
from importlib import resources
from typing import Any

_TYPES = {"int": int, "float": float, "str": str, None: None}


@functools.cache
def _spec() -> dict[str, Any]:
    return json.loads(resources.files("distscope.search").joinpath("data/megatron_args.json").read_text())


def pinned_commit() -> str:
    return str(_spec()["commit"])


class _Fail(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Fail(message)


@functools.cache
def parser() -> argparse.ArgumentParser:
    p = _Parser(allow_abbrev=False, add_help=False)
    seen: set[str] = set()
    for opt, a in _spec()["options"].items():
        if a["dest"] + opt in seen:
            continue
        seen.add(a["dest"] + opt)
        act = a["action"]
        if act == "_StoreTrueAction":
            p.add_argument(opt, dest=a["dest"], action="store_true")
        elif act == "_StoreFalseAction":
            p.add_argument(opt, dest=a["dest"], action="store_false")
        elif act == "BooleanOptionalAction":
            p.add_argument(opt, dest=a["dest"], action="store_true")
        else:
            kw: dict[str, Any] = {"dest": a["dest"], "type": _TYPES.get(a["type"], str)}
            if a["choices"] is not None:
                kw["choices"] = a["choices"]
            if a["nargs"] not in (None, 0):
                kw["nargs"] = a["nargs"]
            p.add_argument(opt, **kw)
    return p


def check(args: list[str], env: dict[str, str], pre_blackwell: bool) -> list[str]:
    """Problems with `args` (with environment `env`) for Megatron-LM at the pinned commit; [] if none."""
    try:
        ns = parser().parse_args(args)
    except _Fail as exc:
        return [f"Megatron-LM@{pinned_commit()[:8]} rejects the arguments: {exc}"]
    v = vars(ns)
    out = []
    tp, cp = v.get("tensor_model_parallel_size") or 1, v.get("context_parallel_size") or 1
    fsdp = bool(v.get("use_megatron_fsdp"))
    if v.get("tp_comm_overlap") and not v.get("sequence_parallel"):
        out.append("--tp-comm-overlap needs --sequence-parallel")
    if v.get("overlap_param_gather") and not (v.get("use_distributed_optimizer") or fsdp):
        out.append("--overlap-param-gather needs --use-distributed-optimizer or Megatron-FSDP")
    if v.get("overlap_param_gather") and not v.get("overlap_grad_reduce"):
        out.append("--overlap-param-gather needs --overlap-grad-reduce")
    if fsdp and v.get("ckpt_format") != "fsdp_dtensor":
        out.append("Megatron-FSDP needs --ckpt-format fsdp_dtensor")
    if fsdp and env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        out.append("Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset")
    if fsdp and (tp > 1 or cp > 1) and pre_blackwell:
        out.append("Megatron warns against Megatron-FSDP with tensor/context parallelism before Blackwell")
    if not fsdp and (tp > 1 or cp > 1) and pre_blackwell and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
        out.append("tensor/context parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell")
    if sum(v.get(k) is not None for k in ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
                                          "pipeline_model_parallel_layout")) > 1:
        out.append("at most one of the virtual-pipeline options may be set")
    pp = v.get("pipeline_model_parallel_size") or 1
    layout = v.get("pipeline_model_parallel_layout")
    if layout is not None and len(layout.split("|")) % pp:
        out.append(f"--pipeline-model-parallel-layout has {len(layout.split('|'))} stages, not a multiple of pp={pp}")
    n = v.get("num_layers_per_virtual_pipeline_stage")
    if n is not None and (v.get("num_layers") or 0) % (pp * n):
        out.append(f"--num-layers {v.get('num_layers')} is not divisible by pp*layers-per-virtual-stage={pp * n}")
    return out
