"""The validation contract covers the layouts real frameworks run (issue 9 item 5, item 7's columns):
vp=auto, uneven first/last stages, FSDP without reshard, schedules, MoE columns; bad cells are one
line naming the column. The rows below test expressibility: their measured time is a placeholder
(1 s) and their error is not checked."""

from __future__ import annotations

import csv
import io

import pytest

from distscope.plan import Schedule
from distscope.validate.harness import validate_file

FIELDS = ["run_id", "source", "model", "arch", "params_B", "layers", "hidden", "heads", "kv_heads", "ffn_hidden",
          "ffn_act", "vocab", "seq_len", "global_batch", "micro_batch", "tp", "pp", "vp", "dp", "cp", "ep",
          "sequence_parallel", "zero_stage", "distributed_optimizer", "overlap", "recompute", "precision", "gpu",
          "num_gpus", "gpus_per_node", "intra_node_GBps", "inter_node_GBps_per_gpu", "framework",
          "measured_step_time_s", "first_stage_layers", "last_stage_layers", "reshard_after_forward", "schedule",
          "experts", "top_k", "moe_ffn_hidden", "shared_experts", "moe_dense_layers", "etp", "capacity_factor",
          "head_dim"]

# a Llama-3-405B-style layout: 126 layers, tp8 pp16, FSDP over DP without reshard, vp unknown
L405 = dict(run_id="L405-STYLE", source="test", model="llama-405b-shape", arch="llama", params_B="405", layers="126",
            hidden="16384", heads="128", kv_heads="8", ffn_hidden="53248", ffn_act="swiglu", vocab="128256",
            seq_len="8192", global_batch="512", micro_batch="1", tp="8", pp="16", vp="auto", dp="8", cp="1", ep="1",
            sequence_parallel="1", zero_stage="3", distributed_optimizer="1", overlap="auto", recompute="auto",
            precision="bf16", gpu="h100-sxm5-80gb", num_gpus="1024", gpus_per_node="8", intra_node_GBps="450",
            inter_node_GBps_per_gpu="50", framework="Meta internal", measured_step_time_s="1.0",
            reshard_after_forward="0")
MIXTRAL = dict(L405, run_id="MIXTRAL-STYLE", model="mixtral-shape", layers="32", hidden="4096", heads="32",
               kv_heads="8", ffn_hidden="14336", vocab="32000", seq_len="4096", global_batch="256", tp="2", pp="4",
               vp="1", dp="8", ep="8", num_gpus="64", zero_stage="1", reshard_after_forward="", experts="8",
               top_k="2", etp="1", capacity_factor="1.25", schedule="zb-h1", framework="Megatron-Core")


def _csv(tmp_path, *rows: dict[str, str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, restval="")
    w.writeheader()
    w.writerows(rows)
    p = tmp_path / "runs.csv"
    p.write_text(buf.getvalue())
    return str(p)


def test_llama3_405b_style_layout_is_expressible_and_priced(tmp_path) -> None:
    (r,) = validate_file(_csv(tmp_path, L405))
    assert r.error == "" and r.plan is not None and r.predicted_step_time_s
    plan = r.plan
    assert plan.zero_stage == 3 and not plan.reshard_after_forward
    sizes = plan.stage_layers
    assert sum(sizes) == 126 and len(sizes) == 16 * plan.vp
    per_rank = [sum(sizes[i::16]) for i in range(16)]
    assert per_rank[0] == per_rank[-1] == 7 and set(per_rank[1:-1]) == {8}  # one layer fewer at each end


def test_explicit_first_last_stage_layers(tmp_path) -> None:
    row = dict(L405, run_id="FL", vp="1", first_stage_layers="6", last_stage_layers="8", layers="126")
    (r,) = validate_file(_csv(tmp_path, row))
    assert r.error == "" and r.plan is not None
    assert r.plan.stage_layers[0] == 6 and r.plan.stage_layers[-1] == 8 and set(r.plan.stage_layers[1:-1]) == {8}


def test_moe_row_with_schedule_etp_and_capacity(tmp_path) -> None:
    (r,) = validate_file(_csv(tmp_path, MIXTRAL))
    assert r.error == "" and r.plan is not None
    assert r.plan.schedule is Schedule.ZB_H1 and r.plan.expert_tp == 1 and r.plan.capacity_factor == 1.25
    assert r.plan.ep == 8


@pytest.mark.parametrize("change,message", [
    (dict(vp="two"), "column vp='two' is not an integer"),
    (dict(reshard_after_forward="yes"), "column reshard_after_forward='yes' must be 0 or 1"),
    (dict(reshard_after_forward="0", zero_stage="1"), "reshard_after_forward='0' =0 needs zero_stage=3"),
    (dict(schedule="zb"), "column schedule='zb' must be one of"),
    (dict(first_stage_layers="5", vp="1"), "first_stage_layers=5"),
    (dict(experts="8"), "column top_k='' is empty but experts=8"),
    (dict(etp="2"), "column etp='2' needs a MoE model"),
    (dict(capacity_factor="-1", experts="8", top_k="2"), "column capacity_factor='-1' must be a finite number > 0"),
    (dict(arch="catalog", model="no-such-model"), "column model='no-such-model' is not a catalog model"),
])
def test_bad_layout_cells_are_one_line_errors(tmp_path, change, message) -> None:
    (r,) = validate_file(_csv(tmp_path, dict(L405, **change)))
    assert message in r.error and "\n" not in r.error and r.predicted_step_time_s is None


def test_catalog_arch_takes_the_built_in_model(tmp_path) -> None:
    row = dict(MIXTRAL, run_id="DSV3", arch="catalog", model="deepseek-v3", layers="61", hidden="7168", heads="128",
               vocab="129280", experts="", top_k="", etp="", capacity_factor="", tp="1", pp="16", dp="128", ep="64",
               num_gpus="2048", global_batch="15360", schedule="dualpipe", sequence_parallel="0", recompute="full")
    (r,) = validate_file(_csv(tmp_path, row))
    assert r.error == "" and r.plan is not None and r.plan.schedule is Schedule.DUALPIPE
    bad = dict(row, hidden="4096")
    (r,) = validate_file(_csv(tmp_path, bad))
    assert "does not match catalog model deepseek-v3" in r.error


def test_head_dim_column_widens_attention(tmp_path) -> None:
    """Qwen3-style head_dim 128 at hidden/heads 64: the q/o projections and the attention core double,
    so the step is slower than with the implied head_dim; a bad cell is one line naming the column."""
    base = dict(MIXTRAL, run_id="HD64", heads="64", ep="1", experts="", top_k="", etp="", capacity_factor="", schedule="")
    wide, implied = validate_file(_csv(tmp_path, dict(base, run_id="HD128", head_dim="128"), base))
    assert wide.error == implied.error == "" and wide.predicted_step_time_s > implied.predicted_step_time_s  # type: ignore[operator]
    (bad,) = validate_file(_csv(tmp_path, dict(base, head_dim="wide")))
    assert "head_dim" in bad.error and "\n" not in bad.error
