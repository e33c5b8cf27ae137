"""Check Megatron-LM arguments against the argument list of a pinned Megatron-LM commit.

data/megatron_args.json holds every option of megatron/training/arguments.py's parser (option
strings, action, type, choices), dumped from the real parser at the commit it names. The emitted
arguments are parsed by an argparse parser rebuilt from it (unknown flag, wrong type, bad choice,
missing value all fail), then checked against the validate_args rules distscope's plans can touch
(a hybrid's --hybrid-layer-pattern among them).
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
    return out + _hybrid(v, pp)


# megatron/core/models/hybrid/hybrid_layer_allocation.py Symbols (M Mamba, G GDN, * attention, D DSA, + MLA,
# - MLP, E MoE; | pipeline segment, / MTP)
_HYBRID_LAYERS = frozenset("MG*D+-E")


def _hybrid(v: dict[str, Any], pp: int) -> list[str]:
    """validate_args' rules for --hybrid-layer-pattern (arguments.py, the pinned commit) and the segment split
    of hybrid_layer_allocation.select_pipeline_segment."""
    pattern = v.get("hybrid_layer_pattern")
    if pattern is None:
        return []
    out = []
    if v.get("hybrid_override_pattern") is not None:
        out.append("--hybrid-override-pattern and --hybrid-layer-pattern cannot both be specified")
    main = pattern.split("/")[0]
    segments = main.split("|")
    if any(c not in _HYBRID_LAYERS for c in "".join(segments)) or not all(segments):
        out.append(f"--hybrid-layer-pattern {pattern!r}: every '|'-separated segment needs one or more of "
                   f"{''.join(sorted(_HYBRID_LAYERS))}")
    if "*" in main and ("D" in main or "+" in main):
        out.append("Megatron does not support Attention and MLA/DSA in one hybrid model")
    for flag, dest in (("--num-layers-per-virtual-pipeline-stage", "num_layers_per_virtual_pipeline_stage"),
                       ("--num-virtual-stages-per-pipeline-rank", "num_virtual_stages_per_pipeline_rank"),
                       ("--pipeline-model-parallel-layout", "pipeline_model_parallel_layout")):
        if v.get(dest) is not None:
            out.append(f"{flag} should not be used with --hybrid-layer-pattern (its '|' segments set the stages)")
    for flag, dest in (("--account-for-embedding-in-pipeline-split", "account_for_embedding_in_pipeline_split"),
                       ("--account-for-loss-in-pipeline-split", "account_for_loss_in_pipeline_split")):
        if v.get(dest):
            out.append(f"{flag} should not be used with --hybrid-layer-pattern")
    if len(segments) > 1:
        if v.get("decoder_first_pipeline_num_layers") is not None or v.get("decoder_last_pipeline_num_layers") is not None:
            out.append("--decoder-first/last-pipeline-num-layers with a pipe-separated --hybrid-layer-pattern")
        if len(segments) % pp:
            out.append(f"--hybrid-layer-pattern has {len(segments)} pipeline segments, not a multiple of pp={pp}")
    elif pp > 1 and len(main) % pp:
        out.append(f"--hybrid-layer-pattern's {len(main)} layers without '|' must divide by pp={pp}")
    if v.get("num_layers") is not None and v["num_layers"] != len("".join(segments)):
        out.append(f"--num-layers {v['num_layers']} is not the pattern's {len(''.join(segments))} layers (Megatron "
                   "would ignore it)")
    return out
