"""Plans the estimator does not price for an architecture beyond the plain transformer: hybrids with linear
mixers (model/linear_mixer.py), DeepSeek-V4's compressed attention (model/compressed_attention.py) and DeepSeek
Sparse Attention (model/sparse_attention.py)."""

from __future__ import annotations

from distscope.plan import Plan, Recompute
from distscope.workload.spec import ModelSpec


def refusal(spec: ModelSpec, plan: Plan) -> str | None:
    """Why `plan` cannot run, or is not priced, for `spec` (None: it is): the architecture's own layout rules
    (ModelSpec.layout_refusal) and torchtitan's per-op selective checkpointing, whose saved and recomputed ops
    (model/op_sac.py) are a transformer block's."""
    if spec.sparse_attention is not None:  # DSA runs MLA in its absorbed form (model/sparse_attention.py)
        if plan.tp > 1 and not plan.sp:  # Megatron-Core absorbed_mla.py asserts it
            return (f"tp={plan.tp} without sequence parallelism: DeepSeek Sparse Attention's absorbed MLA needs it "
                    "(add --sequence-parallel)")
        if plan.recompute is Recompute.SELECTIVE_OP:
            return "recompute=selective-op (torchtitan's per-op checkpointing) is not modelled for DeepSeek Sparse Attention"
    if spec.special_layers is None:
        return None
    if plan.recompute is Recompute.SELECTIVE_OP:
        return f"recompute=selective-op (torchtitan's per-op checkpointing) is not modelled for {spec.special_layers}"
    return spec.layout_refusal(plan.tp, plan.cp)
