"""`distscope serve ...`: JSON contracts, one-line errors naming field and value, the no-plan answer,
and a core that runs without torch."""

import json
import os
import subprocess
import sys

import pytest
from tests.conftest import REPO

from distscope.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = 0
    try:
        main(["serve", *args])
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_estimate_issue_example(capsys) -> None:
    code, out, err = run(capsys, "estimate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "8", "--tp", "4",
                         "--weights", "fp8", "--kv", "fp8", "--concurrency", "32", "--input-len", "2000", "--output-len", "300",
                         "--stack", "trtllm", "--json")
    assert code == 0, err
    d = json.loads(out)
    for k in ("ttft_s", "tpot_s", "latency_s", "throughput_out_tok_s", "kv_cache_bytes", "max_batch", "memory_per_gpu_bytes"):
        assert k in d
    assert d["replicas"] == 2 and d["precision"] == "w=fp8 a=fp8 kv=fp8"
    assert d["memory_per_gpu_bytes"] < 81559 * 2**20


@pytest.mark.parametrize("mode", [["--rate", "10"], ["--concurrency", "16"], ["--burst"]])
def test_simulate_modes_json(capsys, mode) -> None:
    code, out, err = run(capsys, "simulate", "--requests", "300", "--input-len", "500", "--output-len", "100",
                         "--slo", "ttft=2,tpot=80ms", "--json", *mode)
    assert code == 0, err
    d = json.loads(out)
    for k in ("ttft_s_p50", "ttft_s_p90", "ttft_s_p99", "tpot_s_p50", "tpot_s_p99", "latency_s_p99",
              "throughput_out_tok_s", "goodput_req_s", "slo_attainment"):
        assert k in d
    assert d["requests"] == 300


def test_simulate_replicas_and_disagg(capsys) -> None:
    code, out, _ = run(capsys, "simulate", "--gpus", "4", "--rate", "20", "--requests", "400", "--json")
    assert code == 0 and json.loads(out)["replicas"] == 4
    code, out, _ = run(capsys, "simulate", "--gpus", "4", "--disagg", "1:3", "--rate", "20", "--requests", "400", "--json")
    d = json.loads(out)
    assert code == 0 and d["replicas"] == 1 and d["decode_replicas"] == 3


def test_plan_explains_the_winner(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", "llama3-8b", "--gpus", "4", "--rate", "10", "--slo", "ttft=1,tpot=60ms",
                         "--input-len", "1000", "--output-len", "200", "--requests", "300", "--simulate-top", "4", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["best"]["simulated"]["slo_attainment"] >= 0.9 and "no_plan_meets_slo" not in d
    assert " instead of " in d["why"]


def test_plan_when_no_layout_meets_the_slo(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", "llama3-8b", "--gpus", "2", "--rate", "5", "--slo", "ttft=1ms,tpot=1ms",
                       "--input-len", "1000", "--output-len", "100", "--requests", "200", "--simulate-top", "2")
    assert code == 0
    assert "no plan meets ttft ≤ 0.001 s and tpot ≤ 0.001 s" in out and "best is tp=" in out


def test_validate_json(capsys, validation_dir) -> None:
    code, out, _ = run(capsys, "validate", str(validation_dir / "serving_runs.csv"), "--json")
    d = json.loads(out)
    assert code == 0 and set(d["rows"][0]) == {"run_id", "metric", "predicted", "measured", "error_pct"}
    assert set(d["mape_pct"]) == {"throughput_out_tok_s", "ttft_s", "tpot_s"} and d["skipped"]


def _llama_config(tmp_path, positions: int) -> str:
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": positions}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return str(p)


@pytest.mark.parametrize("args,message", [
    (["estimate", "--model", "llama3.1-405b"], "model llama3.1-405b needs 756.0 GiB of weights per GPU at tp=1 pp=1"),
    (["estimate", "--model", "llama3-8b", "--input-len", "9000"], "input_len=9000 is beyond model llama3-8b's context of 8192"),
    (["estimate", "--kv", "fp6"], "--kv='fp6' is not a serving dtype"),
    (["estimate", "--weights", "fp4", "--act", "fp4"], "act=fp4: device h100-sxm5-80gb has no fp4 tensor cores"),
    (["simulate", "--stack", "vllm9"], "--stack='vllm9' is not a serving stack"),
    (["simulate", "--rate", "1", "--burst"], "give one of --rate, --concurrency, --burst, --trace"),
    (["simulate", "--slo", "ttft=fast"], "--slo='ttft=fast': ttft='fast' is not a number"),
    (["estimate", "--tp", "3"], "tp=3 pp=1 ep=1: tp must divide the model's heads=32"),
])
def test_bad_input_is_one_line(capsys, args, message) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2 and err.startswith("distscope: error: ") and err.count("\n") == 1
    assert message in err


def test_kv_cache_that_cannot_hold_one_request(capsys, tmp_path) -> None:
    cfg = _llama_config(tmp_path, 4_000_000)
    code, _, err = run(capsys, "simulate", "--model", cfg, "--input-len", "1000000", "--output-len", "10", "--requests", "1")
    assert code == 2 and "one request needs 1000010 (input_len=1000000, output_len=10)" in err


def test_malformed_trace_file(capsys, tmp_path) -> None:
    p = tmp_path / "trace.csv"
    p.write_text("arrival_s,input_len,output_len\n0.0,100,20\n0.5,abc,20\n")
    code, _, err = run(capsys, "simulate", "--trace", str(p))
    assert code == 2 and "line 3: input_len='abc' is not a number" in err


def test_serve_runs_without_torch() -> None:
    code = ("import sys\nsys.modules['torch'] = None\nfrom distscope.cli import main\n"
            "main(['serve', 'simulate', '--rate', '5', '--requests', '100', '--json'])\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requests"] == 100
