"""Convergence comparison in sharded data parallelism (SDP4Bit Table 1 shape): uncompressed baseline,
qWD + TLq-HS, and direct int4 weights, each on 4 gloo ranks from the same init and the same batches.

final_loss: mean training loss (averaged over ranks) of the last max(5, steps/10) steps;
eval_loss: mean loss of the final shared weights on 4 held-out batches of 32 sequences.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from distscope.compress.launch import run_gloo
from distscope.compress.sharded_dp import TrainConfig, train_worker
from distscope.compress.spec import CompressionMethod
from distscope.errors import DistscopeError

WORLD = 4
RUNS: dict[str, tuple[CompressionMethod, CompressionMethod]] = {  # name -> (weights, grads)
    "baseline": (CompressionMethod.NONE, CompressionMethod.NONE),
    "qwd+tlq-hs": (CompressionMethod.QWD_INT4, CompressionMethod.TLQ_HS),
    "int4-weights": (CompressionMethod.INT4, CompressionMethod.NONE),
    # ablations (not run by default): each SDP4Bit component alone
    "qwd-only": (CompressionMethod.QWD_INT4, CompressionMethod.NONE),
    "tlq-hs-only": (CompressionMethod.NONE, CompressionMethod.TLQ_HS),
    "int4-grads-only": (CompressionMethod.NONE, CompressionMethod.INT4),
}
DEFAULT_RUNS = ("baseline", "qwd+tlq-hs", "int4-weights")


def run_convergence(steps: int, *, seed: int = 0, runs: tuple[str, ...] = DEFAULT_RUNS,
                    progress: Callable[[str], None] = lambda _: None,
                    timeout_s: float = 600.0) -> dict[str, dict[str, object]]:
    if steps < 10:
        raise DistscopeError(f"convergence: steps={steps} must be >= 10")
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        raise DistscopeError(f"convergence: runs={unknown}; valid: {', '.join(RUNS)}")
    tail = max(5, steps // 10)
    out: dict[str, dict[str, object]] = {}
    for name in runs:
        weights, grads = RUNS[name]
        progress(f"{name}: {steps} steps on {WORLD} gloo ranks")
        res = run_gloo(train_worker, WORLD, TrainConfig(weights=weights, grads=grads, steps=steps, seed=seed),
                       timeout_s=timeout_s)
        losses = res["losses"]
        out[name] = {"final_loss": statistics.mean(losses[-tail:]), "eval_loss": res["eval_loss"],
                     "first_loss": losses[0], "train_s": res["train_s"], "losses": losses}
    if "baseline" in out:
        base_final = float(out["baseline"]["final_loss"])  # type: ignore[arg-type]
        base_eval = float(out["baseline"]["eval_loss"])  # type: ignore[arg-type]
        for row in out.values():
            row["final_vs_baseline_pct"] = 100 * (float(row["final_loss"]) / base_final - 1)  # type: ignore[arg-type]
            row["eval_vs_baseline_pct"] = 100 * (float(row["eval_loss"]) / base_eval - 1)  # type: ignore[arg-type]
    return out
