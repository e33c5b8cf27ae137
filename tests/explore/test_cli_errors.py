"""Bad input to `distscope explore`: one line on stderr naming the field, exit 2, no output written."""

from __future__ import annotations

import pytest

from tests.explore.explore_support import SMALL, cli


@pytest.mark.parametrize(("argv", "msg"), [
    (["--vary", "hbm_bw=1,2"], "--vary='hbm_bw' is not an axis"),
    (["--vary", "nic_GBps=-50,100"], "axis nic_GBps: value -50.0 must be > 0"),
    (["--vary", "nic_GBps=10:20:0"], "count=0"),
    (["--vary", "gpus="], "axis gpus has no values"),
    (["--cluster", "dgx-h1000"], "cluster='dgx-h1000' is not a preset; closest: dgx-h100"),
    (["--vary", "cluster=dgx-h100,nope"], "cluster='nope' is not a preset"),
    (["--model", "llama3-7b"], "model='llama3-7b' is not in the catalog"),
    (["--gpus", "-8"], "axis gpus: value -8 must be > 0"),
    (["--price", "-1"], "per_gpu_hour=-1.0 must be > 0"),
    (["--train-tokens", "0"], "train_tokens=0.0 must be > 0"),
    (["--tdp", "nan"], "tdp_W=nan must be > 0"),
    (["--workers", "-1"], "--workers=-1"),
    (["--precision", "fp4"], "--precision='fp4'"),
    (["--plot", "x.png"], "--plot='x.png' must be an .html file path"),
    (["--software", "titan"], "--software='titan' is not a software preset; closest: torchtitan"),
])
def test_one_line_errors(argv: list[str], msg: str) -> None:
    code, out, err = cli(["--model", "llama3-8b", "--gpus", "8", *argv])
    assert code == 2, (code, err)
    assert err.startswith("distscope: error: ") and err.count("\n") == 1 and msg in err, err
    assert "Traceback" not in err + out


def test_bad_yaml_file(tmp_path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("axes:\n  nic_GBps: [25, 50\n")
    code, _, err = cli([str(f)])
    assert code == 2 and "malformed YAML" in err and str(f) in err
    code, _, err = cli([str(tmp_path / "missing.yaml")])
    assert code == 2 and "does not exist" in err


def test_bad_software_in_yaml_names_file_and_field(tmp_path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3-8b\ngpus: 8\nsoftware: megatron\n")
    code, _, err = cli([str(f)])
    assert code == 2 and str(f) in err and "software='megatron' is not a software preset" in err, err


def test_price_model_that_goes_negative_is_named(tmp_path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3-8b\ngpus: 8\nglobal_batch: 32\nprice: {per_gpu_hour: 1, per_unit: {hbm_GiB: 0.1}}\n"
                 "axes: {hbm_GiB: [40, 80]}\n")
    out = tmp_path / "o.json"
    code, _, err = cli([str(f), "--no-compression", "--out", str(out)])
    assert code == 2 and "the price model gives -3 per GPU-hour at point 0 (hbm_GiB=40.0)" in err
    assert not out.exists()


def test_yaml_and_flags_combine(tmp_path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3-8b\ngpus: 8\nglobal_batch: 32\naxes: {nic_GBps: [25, 50]}\n")
    code, out, err = cli([str(f), "--vary", "hbm_GBps=2000,3000", "--no-compression", "--json"])
    assert code == 0, err
    import json

    d = json.loads(out)
    assert len(d["points"]) == 4 and d["sweep"]["axes"] == {"nic_GBps": [25.0, 50.0], "hbm_GBps": [2000.0, 3000.0]}
    assert SMALL[1] == "llama3-8b"


def test_plot_writes_both_fronts(tmp_path) -> None:
    pytest.importorskip("plotly")
    html = tmp_path / "s.html"
    code, _, err = cli([*SMALL, "--no-compression", "--plot", str(html)])
    assert code == 0, err
    text = html.read_text()
    assert text.count("Pareto front") >= 3  # two charts' traces and the table's title
    assert "time vs cost" in text and "time vs gpus" in text


def test_hf_config_is_a_model_axis_value(tmp_path) -> None:
    """A Hugging Face config.json with Llama 3 8B's dimensions plans like the catalog's llama3-8b."""
    import json

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                               "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                               "vocab_size": 128256, "max_position_embeddings": 8192}))
    code, out, err = cli(["--gpus", "8", "--global-batch", "32", "--vary", f"model=llama3-8b,{cfg}",
                          "--no-compression", "--workers", "1", "--json"])
    assert code == 0, err
    a, b = json.loads(out)["points"]
    assert b["model"] == str(cfg) and a["status"] == b["status"] == "ok"
    assert a["step_time_s"] == b["step_time_s"] and a["best_plan"] == b["best_plan"]
