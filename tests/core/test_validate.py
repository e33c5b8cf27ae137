"""`distscope validate` on the published runs, on rows it has never seen, and on malformed rows."""

import csv
import io

import pytest

from distscope.validate.harness import summary, validate_file


@pytest.fixture(scope="module")
def published(validation_dir):
    return validation_dir / "published_runs.csv"


def test_published_runs_mean_error_at_most_10pct(published) -> None:
    s = summary(validate_file(published))
    assert s["failed_rows"] == 0
    assert s["predicted_rows"] >= 50
    # issue target: mean <= 10% (long-term 3% mean / 8% max); measured 5.6% mean, 31.0% max
    # (MBRIDGE 405B) with kernel-level efficiency and three fitted globals; it was 4.6% / 18.3% with
    # more constants fitted to these rows, and 37.9% (now 26.5%) on the independent evidence rows
    assert s["mape_pct"] <= 7.0, s["mape_pct"]
    assert s["max_ape_pct"] <= 35.0, s["max_ape_pct"]


def _rows(published) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(published.open())
    return list(reader.fieldnames or []), list(reader)


def _write(tmp_path, fields, rows) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    w.writerows(rows)
    p = tmp_path / "runs.csv"
    p.write_text(buf.getvalue())
    return str(p)


def test_malformed_rows_are_reported_and_others_still_run(tmp_path, published) -> None:
    fields, rows = _rows(published)
    rows = rows[:4]
    rows[1] = dict(rows[1], tp="eight")
    rows[2] = dict(rows[2], precision="fp12")
    path = _write(tmp_path, fields, rows)
    res = validate_file(path)
    assert [r.run_id for r in res] == [r["run_id"] for r in rows]
    assert "column tp='eight' is not an integer" in res[1].error and rows[1]["run_id"] in res[1].error
    assert "column precision='fp12'" in res[2].error
    assert res[0].predicted_step_time_s and res[3].predicted_step_time_s
    s = summary(res)
    assert s["predicted_rows"] == 2 and s["failed_rows"] == 2


def test_unseen_row_is_predicted(tmp_path, published) -> None:
    """A new run (Llama-2 70B shape on 128 H100s, invented plan) goes through the same contract."""
    fields, rows = _rows(published)
    new = dict(rows[-3], run_id="NEW-1", layers="80", hidden="8192", heads="64", kv_heads="8", ffn_hidden="28672",
               vocab="32000", seq_len="4096", global_batch="512", micro_batch="auto", tp="8", pp="4", vp="2", dp="4",
               cp="1", num_gpus="128", recompute="auto", sequence_parallel="auto", overlap="auto",
               measured_step_time_s="10.0", framework="Megatron-Core")
    res = validate_file(_write(tmp_path, fields, [new]))
    assert res[0].error == "" and res[0].predicted_step_time_s and res[0].plan is not None
    assert res[0].plan.vp == 2 and res[0].plan.tp == 8


def test_plan_that_cannot_exist_is_reported(tmp_path, published) -> None:
    fields, rows = _rows(published)
    bad = dict(rows[0], run_id="BAD-GPUS", num_gpus="33")
    res = validate_file(_write(tmp_path, fields, [bad]))
    assert "BAD-GPUS" in res[0].error and "gpus=33" in res[0].error
