"""The tidy result table: one row per point, its inputs, the hardware it ran on, its best plan and the
objectives; plus the Pareto fronts and the summary picks. Every output format is written from it.

Row order is the grid order; nothing in a row depends on the engine, the batching or a clock, so the
same sweep gives the same table, byte for byte, on every engine.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from distscope.errors import DistscopeError
from distscope.explore.hardware import apply_hardware, resolved
from distscope.explore.objectives import objectives
from distscope.explore.pareto import pareto_front
from distscope.explore.point import OK, RESULT_FIELDS, Point
from distscope.explore.sweep import Sweep
from distscope.system.power import tdp_W
from distscope.system.presets import get_cluster

INPUT_COLUMNS: dict[str, type] = {"index": int, "model": str, "cluster": str, "gpus": int, "global_batch": int,
                                  "seq": int}
HW_COLUMNS: dict[str, type] = {"device": str, "peak_tflops": float, "hbm_GiB": float, "hbm_GBps": float,
                               "nvlink_size": int, "nvlink_GBps": float, "nvlink_latency_us": float,
                               "nic_GBps": float, "nic_latency_us": float, "tdp_W": float,
                               "price_per_gpu_hour": float}
OBJECTIVE_COLUMNS: dict[str, type] = {"time_to_train_s": float, "gpu_hours": float, "cost": float,
                                      "energy_MWh": float}
PLAN_COLUMNS = ("dp", "tp", "pp", "vp", "cp", "ep", "sequence_parallel", "zero_stage", "distributed_optimizer",
                "micro_batch", "recompute", "recompute_layers", "schedule", "stage_layers", "compression")
FRONT_COLUMNS: dict[str, type] = {"pareto_time_cost": bool, "pareto_time_gpus": bool}
COLUMNS: dict[str, type] = {**INPUT_COLUMNS, **HW_COLUMNS, "status": str, "reason": str,
                            "step_time_s": float, "tokens_per_s": float, **OBJECTIVE_COLUMNS,
                            **{k: t for k, t in RESULT_FIELDS.items() if k not in ("status", "reason", "step_time_s",
                                                                                    "tokens_per_s")},
                            **FRONT_COLUMNS, "key": str}


@functools.lru_cache(maxsize=1024)
def _hardware(cluster: str, hw: tuple[tuple[Any, Any], ...], gemm_dtype: Any) -> tuple[dict[str, float], dict[str, float], str]:
    preset = get_cluster(cluster, 1)  # hardware values do not depend on the GPU count
    return resolved(apply_hardware(preset, dict(hw)), gemm_dtype), resolved(preset, gemm_dtype), preset.device.name


def check_prices(sweep: Sweep, points: Sequence[Point]) -> None:
    """Every point's price per GPU-hour is > 0 (checked before any planning)."""
    gemm = sweep.plan.precision.gemm_dtype
    for i, p in enumerate(points):
        hw, preset_hw, _ = _hardware(p.cluster, p.hw, gemm)
        price = sweep.objectives.price.price(hw, preset_hw)
        if not price > 0:
            raise DistscopeError(f"the price model gives {price:g} per GPU-hour at point {i} "
                                 f"({', '.join(f'{a.value}={v}' for a, v in p.hw)}); it must be > 0")


def build(sweep: Sweep, points: Sequence[Point], results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """{"rows": [...], "pareto": {...}, "best": {...}} for points whose results are all present."""
    obj = sweep.objectives
    gemm = sweep.plan.precision.gemm_dtype
    rows: list[dict[str, Any]] = []
    for i, p in enumerate(points):
        key = p.key(sweep.plan)
        r = results[key]
        hw, preset_hw, device = _hardware(p.cluster, p.hw, gemm)
        price = obj.price.price(hw, preset_hw)
        if price <= 0:
            raise DistscopeError(f"the price model gives {price:g} per GPU-hour at point {i} "
                                 f"({', '.join(f'{a.value}={v}' for a, v in p.hw)}); it must be > 0")
        row: dict[str, Any] = {"index": i, "model": p.model, "cluster": p.cluster, "gpus": p.gpus,
                               "global_batch": p.global_batch, "seq": p.seq, "device": device, **hw,
                               "tdp_W": obj.tdp_W if obj.tdp_W is not None else tdp_W(device),
                               "price_per_gpu_hour": price}
        row.update({k: r.get(k) for k in RESULT_FIELDS})
        if r["status"] == OK:
            row.update(objectives(tokens_per_s=r["tokens_per_s"], gpus=p.gpus, price_per_gpu_hour=price,
                                  tdp_W=row["tdp_W"], train_tokens=obj.train_tokens))
        else:
            row.update({k: None for k in OBJECTIVE_COLUMNS})
        row["key"] = key
        rows.append({c: row.get(c) for c in COLUMNS})
    ok = [r for r in rows if r["status"] == OK]
    ids = [r["index"] for r in ok]
    t = [r["time_to_train_s"] for r in ok]
    fronts = {"time_cost": pareto_front(t, [r["cost"] for r in ok], ids),
              "time_gpus": pareto_front(t, [float(r["gpus"]) for r in ok], ids)}
    on_cost, on_gpus = set(fronts["time_cost"]), set(fronts["time_gpus"])
    for r in rows:
        r["pareto_time_cost"] = r["index"] in on_cost
        r["pareto_time_gpus"] = r["index"] in on_gpus
    best: dict[str, int | None] = {
        "fastest": min(ids, key=lambda i: (rows[i]["time_to_train_s"], i)) if ok else None,
        "cheapest": min(ids, key=lambda i: (rows[i]["cost"], i)) if ok else None,
    }
    if obj.budget is not None:
        within = [i for i in ids if rows[i]["cost"] <= obj.budget]
        best["fastest_within_budget"] = min(within, key=lambda i: (rows[i]["time_to_train_s"], i)) if within else None
    return {"rows": rows, "pareto": fronts, "best": best}
