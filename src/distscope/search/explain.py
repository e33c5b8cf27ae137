"""Why the best plan beats the runner-up: the plan fields that differ and the breakdown terms that move.

Each breakdown term (compute, bubble, tp, cp, ep, pp, dp, optimizer; seconds of exposed time per
step, summing to the step time) is differenced best − runner-up. The sentence names the changed
fields, then the terms that got worse for the winner ("but") and those that got better, largest
first, e.g. "pp=8 instead of 4: bubble +0.900 s, but tp −2.100 s; net −1.200 s".
"""

from __future__ import annotations

from distscope.model.stages import chunk_sizes
from distscope.plan import Plan
from distscope.search.planner import Candidate

_FIELDS = ("tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "sp", "zero_stage", "distributed_optimizer",
           "recompute", "recompute_layers", "schedule")
MIN_TERM_S = 1e-4  # terms that move less than this are noise in a sentence


def _value(plan: Plan, f: str) -> str:
    v = getattr(plan, f)
    if hasattr(v, "value"):
        return str(v.value)
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def field_diffs(best: Plan, other: Plan, layers: int) -> list[str]:
    out = [f"{f}={_value(best, f)} instead of {_value(other, f)}" for f in _FIELDS if _value(best, f) != _value(other, f)]
    if best.pp == other.pp and best.vp == other.vp and best.stage_layers != other.stage_layers:
        out.append(f"stage split {list(chunk_sizes(layers, best.pp, best.vp, best.stage_layers))} instead of "
                   f"{list(chunk_sizes(layers, other.pp, other.vp, other.stage_layers))}")
    return out


def term_diffs(best: Candidate, other: Candidate) -> list[tuple[str, float]]:
    """(term, best − other seconds), largest magnitude first, noise dropped."""
    a, b = best.estimate.breakdown_s, other.estimate.breakdown_s
    d = [(k, a.get(k, 0.0) - b.get(k, 0.0)) for k in dict.fromkeys([*a, *b])]
    return sorted([(k, v) for k, v in d if abs(v) >= MIN_TERM_S], key=lambda kv: -abs(kv[1]))


def _fmt(k: str, v: float) -> str:
    return f"{k} {'+' if v > 0 else '−'}{abs(v):.3f} s"


def explain(best: Candidate, other: Candidate, layers: int) -> str:
    fields = field_diffs(best.plan, other.plan, layers) or ["same degrees"]
    terms = term_diffs(best, other)
    worse = [_fmt(k, v) for k, v in terms if v > 0]
    better = [_fmt(k, v) for k, v in terms if v < 0]
    net = best.step_time_s - other.step_time_s
    if worse and better:
        why = f"{', '.join(worse)}, but {', '.join(better)}"
    else:
        why = ", ".join(worse or better) or "identical breakdown"
    return f"{', '.join(fields)}: {why}; net {'+' if net > 0 else '−'}{abs(net):.3f} s"
