"""Plans the estimator does not price for an architecture beyond the plain transformer: hybrids with linear
mixers (model/linear_mixer.py) and DeepSeek-V4's compressed attention (model/compressed_attention.py)."""

from __future__ import annotations

from distscope.plan import Plan, Recompute
from distscope.workload.spec import ModelSpec


def refusal(spec: ModelSpec, plan: Plan) -> str | None:
    """Why `plan` cannot run, or is not priced, for `spec` (None: it is): the architecture's own layout rules
    (ModelSpec.layout_refusal) and torchtitan's per-op selective checkpointing, whose saved and recomputed ops
    (model/op_sac.py) are a transformer block's."""
    if spec.special_layers is None:
        return None
    if plan.recompute is Recompute.SELECTIVE_OP:
        return f"recompute=selective-op (torchtitan's per-op checkpointing) is not modelled for {spec.special_layers}"
    return spec.layout_refusal(plan.tp, plan.cp)
