"""Multi-token prediction (ModelSpec.mtp_layers): one more layer of the last kind and another head pass on
the last pipeline stage, the same in `estimate`, the generated trace and Megatron's arguments; and the two
optional CSV columns that carry published MoE runs' settings (`mtp_layers`, `moe_a2a_overlap`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from distscope.errors import DistscopeError
from distscope.model import estimate
from distscope.model.stages import balanced_chunks, stage_layers
from distscope.scenario import PlanFlags, SystemFlags, WorkloadFlags, build_scenario
from distscope.search.emit import megatron_args
from distscope.search.megatron_check import check as check_megatron
from distscope.sim.consistency import agreement
from distscope.validate.rows import parse_row, read_rows
from distscope.workload import params as P
from distscope.workload.catalog import get_model


def test_mtp_layers_run_on_the_last_stage() -> None:
    split = balanced_chunks(61, 16, 1)  # 61 layers do not divide over 16 stages: an explicit split
    plain = stage_layers(61, 3, 16, 1, split)
    mtp = stage_layers(61, 3, 16, 1, split, mtp=1)
    assert mtp[:-1] == plain[:-1]
    assert (mtp[-1].dense, mtp[-1].moe) == (plain[-1].dense, plain[-1].moe + 1)
    dense = stage_layers(32, 32, 4, 1, mtp=2)  # a dense model's MTP layers are dense
    assert dense[-1].dense == 8 + 2 and dense[-1].moe == 0


def test_deepseek_v3_mtp_module_size() -> None:
    """DeepSeek-V3 report: 671B main model; its MTP module adds one MoE layer, two norms and a 2h x h
    projection (the 14B it quotes includes its own copies of the embedding and head, shared here)."""
    base = get_model("deepseek-v3")
    added = P.total_params(dataclasses.replace(base, mtp_layers=1)) - P.total_params(base)
    layer = P.dense_params_per_layer(base, True) + P.expert_params_per_moe_layer(base)
    assert added == layer + P.mtp_own_params(base)
    assert 11.0e9 < added < 12.5e9


def _scenario(mtp: int):  # type: ignore[no-untyped-def]
    sc = build_scenario(WorkloadFlags(model="deepseek-v3", global_batch=256, seq=4096),
                        SystemFlags(cluster="dgx-b200", gpus=256),
                        PlanFlags(pp=16, ep=8, micro_batch=1, precision="bf16"))
    return dataclasses.replace(sc, spec=dataclasses.replace(sc.spec, mtp_layers=mtp))


def test_mtp_slows_the_last_stage_and_the_verbs_agree() -> None:
    without, with_mtp = _scenario(0), _scenario(1)
    e0 = estimate(without.spec, without.shape, without.cluster, without.plan)
    e1 = estimate(with_mtp.spec, with_mtp.shape, with_mtp.cluster, with_mtp.plan)
    assert e1.stage_time_s[-1] > e0.stage_time_s[-1] and e1.stage_time_s[:-1] == e0.stage_time_s[:-1]
    assert e1.layer_times is not None and e0.layer_times is not None
    assert e1.layer_times.last_s > 1.9 * e0.layer_times.last_s  # a second pass through the output head
    # the generated trace carries the MTP layer and head too: the simulation moves with the estimate
    # (this uneven 16-stage split already differs by 3.3% without MTP; MTP adds under a point)
    assert abs(agreement(with_mtp).rel_diff - agreement(without).rel_diff) <= 0.01


def test_megatron_arguments_name_the_mtp_layers() -> None:
    sc = _scenario(1)
    args = megatron_args(sc.plan, sc.spec, sc.shape)
    assert args[args.index("--mtp-num-layers") + 1] == "1"
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    assert layout.endswith("mL") and layout.count("m") == 1
    assert check_megatron(args, {}, False) == []


def test_csv_column_sets_the_depth_and_refuses_a_negative_one() -> None:
    rows = read_rows(Path(__file__).parents[2] / "data/evidence/training_runs.csv")
    row = next(r for _, r in rows if r["run_id"] == "E9-B200-DeepSeekV3-mxfp8")
    assert parse_row(row, 2).spec.mtp_layers == 1
    with pytest.raises(DistscopeError, match="mtp_layers"):
        parse_row({**row, "mtp_layers": "-1"}, 2)


def test_a2a_overlap_column_reaches_the_plan_and_bad_cells_are_one_line() -> None:
    rows = {r["run_id"]: r for _, r in read_rows(Path(__file__).parents[2] / "data/evidence/training_runs.csv")}
    on = parse_row(rows["E8-Qwen3-235B-TP2-EP32-PP8-a2aoverlap-bf16"], 2)
    off = parse_row(rows["E8-Qwen3-235B-TP2-EP32-PP8-bf16"], 2)
    assert on.moe_a2a_overlap and not off.moe_a2a_overlap
    with pytest.raises(DistscopeError, match="moe_a2a_overlap"):
        parse_row({**rows["E8-Qwen3-235B-TP2-EP32-PP8-bf16"], "moe_a2a_overlap": "yes"}, 2)
    with pytest.raises(DistscopeError, match=r"moe_a2a_overlap.*needs a MoE model"):
        parse_row({**rows["E6-MPT-1b-s512-fp8"], "moe_a2a_overlap": "1"}, 2)
