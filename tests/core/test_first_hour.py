"""Regression tests for what a new user hit in their first hour (issue: "One truth"), each a silent
wrong answer before: now a one-line error (exit 2) or a warning, never a number from bad input."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from distscope.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-5"])
def test_link_bandwidth_must_be_finite_and_positive(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["estimate", "--link", f"nvlink={value}"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--link" in err and "finite number > 0" in err


def test_sequence_beyond_the_models_context_is_called_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["estimate", "--model", "llama3-8b", "--seq", "1000000000", "--global-batch", "8",
                         "--micro-batch", "1", "--json"], capsys)
    assert code == 0
    assert "--seq=1000000000 is beyond model llama3-8b's context of 8192 tokens" in err


def test_help_documents_the_stack_defaults() -> None:
    r = CliRunner().invoke(__import__("distscope.cli", fromlist=["app"]).app, ["estimate", "--help"],
                           env={"COLUMNS": "400"})
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    for phrase in ("none named: 0", "none named: on", "none named: none", "none named: dp,pp,tp", "none named: flash",
                   "default: auto"):
        assert phrase in text, phrase


def test_serve_estimate_concurrency_counts_all_replicas_as_simulate_does(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    def thr(gpus: int, clients: int) -> float:
        code, out, _ = _run(["serve", "estimate", "--gpus", str(gpus), "--concurrency", str(clients), "--json"], capsys)
        assert code == 0
        return float(json.loads(out)["throughput_out_tok_s"])

    # two replicas with 64 clients in all serve what one replica with 32 serves, twice over
    assert thr(2, 64) == pytest.approx(2 * thr(1, 32), rel=1e-9)
