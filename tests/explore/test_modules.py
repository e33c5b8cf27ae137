"""`distscope explore` of a torch module (issue 22): each point's best plan is `plan`'s #1 for the same
scenario (search/module_plan.py), its throughput in samples; bad module input is one line."""

from __future__ import annotations

import json

import pytest

from tests.cli_run import run_cli_parts
from tests.explore.explore_support import cli

pytest.importorskip("torch")

RESNET = ["--model", "torch:examples/modules/resnet.py:resnet50", "--cluster", "dgx-a100", "--global-batch", "256"]
INPUT = ["--input", "x:8x3x224x224:bf16"]


def test_each_point_is_plans_number_one(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "sweep.json"
    code, _, err = cli([*RESNET, *INPUT, "--vary", "gpus=8,32", "--vary", "nic_GBps=12.5,50", "-j", "1",
                        "--out", str(out)])
    assert code == 0, err
    rows = json.loads(out.read_text())["points"]
    assert [r["status"] for r in rows] == ["ok"] * 4
    for r in rows:
        if r["nic_GBps"] != 50:
            continue
        code, text, perr = run_cli_parts(capsys, "plan", *RESNET, *INPUT, "--gpus", str(r["gpus"]), "--json")
        assert code == 0, perr
        best = json.loads(text)["best"]
        assert r["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
        assert r["tokens_per_s"] == pytest.approx(best["samples_per_s"], rel=1e-9)
        got = r["best_plan"]
        assert (got["pp"], got["micro_batch"], got["zero_stage"]) == (best["pp"], best["micro_batch"], best["zero"])
    # a slower network never makes the same point faster
    by = {(r["gpus"], r["nic_GBps"]): r["step_time_s"] for r in rows}
    assert all(by[(g, 12.5)] >= by[(g, 50)] for g in (8, 32))


@pytest.mark.parametrize(("argv", "msg"), [
    ([], "a torch module needs --input"),
    ([*INPUT, "--seq", "2048"], "a torch module is shaped by --input, not by seq"),
    (["--input", "x:8x3:bf17"], "dtype 'bf17'"),
])
def test_bad_module_input_is_one_line(argv: list[str], msg: str) -> None:
    code, out, err = cli([*RESNET, "--gpus", "8", *argv])
    assert code == 2, (code, err)
    assert err.startswith("distscope: error: ") and err.count("\n") == 1 and msg in err, err
    assert "Traceback" not in err + out
