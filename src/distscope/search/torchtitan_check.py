"""Check an emitted torchtitan recipe against the configuration of a pinned torchtitan commit.

torchtitan's current releases are configured in Python (a function returning `Trainer.Config`); its
main branch is not on PyPI, so data/torchtitan_config.json holds the dataclass fields (type, literal
choices) of `TrainingConfig`, `ParallelismConfig` and `CompileConfig` dumped from the classes at the
commit it names, plus which pipeline schedules are single- or multi-stage. The recipe is read with
`ast` (never executed): every `config.<section>.<field> = <literal>` must name a real field with a
value of its type, and the rules torchtitan enforces when it builds the run must hold:
- async TP needs `compile.enable` with 'model' in `compile.components` (CompileConfig.__post_init__);
- pipeline parallelism needs `training.disable_cuda_graphs` (Trainer.Config._validate_cuda_graphs);
- `module_fqns_per_model_part` has one part per virtual stage, 1 per rank for single-stage schedules
  and at least 2 for multi-stage ones (pipeline_parallel.py), covering tok_embeddings, every layer in
  order, norm and lm_head exactly once;
- the degrees multiply to the GPU count and the token counts give a whole number of
  gradient-accumulation steps.
"""

from __future__ import annotations

import ast
import functools
import json
from importlib import resources
from typing import Any

_TOP_LEVEL: dict[str, type] = {"hf_assets_path": str}  # Trainer.Config fields outside the dumped sections
_PY: dict[str, type | tuple[type, ...]] = {"int": int, "bool": bool, "str": str, "float": (int, float), "list": list}


@functools.cache
def _schema() -> dict[str, Any]:
    return json.loads(resources.files("distscope.search").joinpath("data/torchtitan_config.json").read_text())


def pinned_commit() -> str:
    return str(_schema()["commit"])


def _assignments(src: str) -> tuple[dict[str, Any], list[str]]:
    """{'section.field': value} of the recipe's literal assignments, and problems reading it."""
    try:
        tree = ast.parse(src)
    except SyntaxError as exc:
        return {}, [f"recipe is not valid Python: {exc.msg} (line {exc.lineno})"]
    out: dict[str, Any] = {}
    problems: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        t = node.targets[0]
        if not isinstance(t, ast.Attribute):
            continue
        path = ast.unparse(t)
        if not path.startswith("config."):
            continue
        key = path[len("config."):]
        if key in ("activation_checkpoint", "model_spec"):
            out[key] = ast.unparse(node.value)
            continue
        try:
            out[key] = ast.literal_eval(node.value)
        except ValueError:
            problems.append(f"{path} is not set to a literal")
    return out, problems


def _type_ok(value: Any, spec: dict[str, Any]) -> bool:
    if value is None:
        return bool(spec["optional"])
    if spec["type"] == "literal":
        return value in spec["choices"]
    want = _PY.get(spec["type"])
    if want is None:
        return True
    if spec["type"] == "int" and isinstance(value, bool):
        return False
    return isinstance(value, want)


def check(src: str, *, gpus: int, layers: int) -> list[str]:
    """Problems with the recipe `src` for torchtitan at the pinned commit; [] if none."""
    sch = _schema()
    cfg, problems = _assignments(src)
    for key, value in cfg.items():
        if key == "activation_checkpoint":
            if value.replace("()", "") not in sch["activation_checkpoint"]:
                problems.append(f"activation_checkpoint = {value} is not a torchtitan policy")
            continue
        if key == "model_spec":
            if not value.startswith("model_registry("):
                problems.append(f"model_spec = {value} is not built by the model's model_registry")
            continue
        if key in _TOP_LEVEL:
            if not isinstance(value, _TOP_LEVEL[key]):
                problems.append(f"config.{key} = {value!r} has the wrong type")
            continue
        section, _, field = key.partition(".")
        fields = sch["sections"].get(section)
        if fields is None or field not in fields:
            problems.append(f"config.{key} is not a field of torchtitan@{pinned_commit()[:8]}")
        elif not _type_ok(value, fields[field]):
            problems.append(f"config.{key} = {value!r} does not fit its type {fields[field]['type']}"
                            + (f" {fields[field]['choices']}" if fields[field]["choices"] else ""))

    def get(key: str) -> Any:
        section, _, field = key.partition(".")
        return cfg.get(key, sch["sections"][section][field]["default"])

    if get("compile.enable_async_tensor_parallel") and not (
            get("compile.enable") and "model" in (cfg.get("compile.components") or ["model", "loss"])):
        problems.append("async TP needs compile.enable with 'model' in compile.components")
    pp = get("parallelism.pipeline_parallel_degree")
    rep, shard = get("parallelism.data_parallel_replicate_degree"), get("parallelism.data_parallel_shard_degree")
    tp, cp = get("parallelism.tensor_parallel_degree"), get("parallelism.context_parallel_degree")
    if shard == -1:
        shard = gpus // (rep * tp * cp * pp)
    if rep * shard * tp * cp * pp != gpus:
        problems.append(f"degrees replicate {rep} x shard {shard} x tp {tp} x cp {cp} x pp {pp} != {gpus} GPUs")
    if pp > 1:
        if not get("training.disable_cuda_graphs"):
            problems.append("pipeline parallelism needs training.disable_cuda_graphs = True")
        sched = get("parallelism.pipeline_parallel_schedule")
        single = sched in sch["pipeline_schedules_single_stage"]
        if not single and sched not in sch["pipeline_schedules_multi_stage"]:
            problems.append(f"pipeline_parallel_schedule {sched!r} is not a torch pipelining schedule")
        parts = cfg.get("parallelism.module_fqns_per_model_part")
        if parts is not None:
            per_rank, rem = divmod(len(parts), pp)
            if rem or (single and per_rank != 1) or (not single and per_rank < 2):
                problems.append(f"{len(parts)} model parts for pp={pp} with schedule {sched}")
            flat = [m for part in parts for m in part]
            want = ["tok_embeddings", *[f"layers.{i}" for i in range(layers)], "norm", "lm_head"]
            if flat != want:
                problems.append("module_fqns_per_model_part does not cover the model's modules once, in order")
    mb_tokens = get("training.num_tokens_per_microbatch_per_dp_rank")
    step_tokens = get("training.num_tokens_per_train_step")
    per_step = mb_tokens * get("parallelism.num_pp_microbatches") * rep * shard
    if step_tokens != -1 and step_tokens % per_step:
        problems.append(f"num_tokens_per_train_step {step_tokens} is not a whole number of steps of {per_step} tokens")
    if mb_tokens % get("training.max_context_length"):
        problems.append("num_tokens_per_microbatch_per_dp_rank is not a whole number of sequences")
    return problems
