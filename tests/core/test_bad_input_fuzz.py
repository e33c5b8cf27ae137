"""Bad input gives a right answer or one DistscopeError line, never a truncated number or an internal error.

1. Hugging Face config.json: every size is a real positive integer (4096.0 passes; 4096.7, true, "4096",
   NaN, Infinity do not), every flag a real boolean; hypothesis substitutes arbitrary JSON into each field.
2. CSV readers (`validate`, `serve simulate --trace`): a UTF-8 byte-order mark or spaces around header
   names do not hide a column (userfile.parse_csv normalises them); random bytes and rows give a result or
   one error line.
3. `distscope clusters`: each column of the device table holds its own field (system/data/devices.json).
4. The light install (no torch): the torch commands print the install hint, exit 2.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distscope.cli import main
from distscope.errors import DistscopeError
from distscope.serve.requests import read_trace
from distscope.userfile import header_names, parse_csv, write_text
from distscope.validate.rows import REQUIRED, parse_row, read_rows
from distscope.workload.hf import load_hf_config
from distscope.workload.spec import ModelSpec
from tests.conftest import REPO, VALIDATION
from tests.core.test_hf import GPT2, LLAMA3_8B, MIXTRAL, NEOX, QWEN2

SETTINGS: dict[str, Any] = dict(derandomize=True, deadline=None, database=None,
                                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr)."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 1, err


# ---- 1. Hugging Face config.json ---------------------------------------------------------------------

def _write_cfg(directory: Path, cfg: dict[str, Any]) -> Path:
    p = directory / "config.json"
    p.write_text(json.dumps(cfg))  # json.dumps writes NaN/Infinity, which Python's json.loads accepts
    return p


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("hidden_size", 4096.7, "4096.7"),
    ("vocab_size", True, "true"),
    ("intermediate_size", math.nan, "NaN"),
    ("num_hidden_layers", math.inf, "Infinity"),
    ("num_attention_heads", "32", '"32"'),
    ("hidden_size", -4096, "-4096"),
    ("vocab_size", 0, "0"),
    ("num_key_value_heads", 8.5, "8.5"),
    ("head_dim", [128], "[128]"),
    ("max_position_embeddings", math.nan, "NaN"),
    ("vocab_size", 2**64, str(2**64)),
])
def test_hf_bad_number_names_field_and_value(tmp_path: Path, field: str, value: Any, shown: str) -> None:
    p = _write_cfg(tmp_path, {**LLAMA3_8B, field: value})
    with pytest.raises(DistscopeError) as info:
        load_hf_config(str(p))
    assert f"{field}={shown} must be" in str(info.value)


def test_hf_flag_must_be_boolean(tmp_path: Path) -> None:
    p = _write_cfg(tmp_path, {**LLAMA3_8B, "tie_word_embeddings": "false"})  # a string: truthy
    with pytest.raises(DistscopeError, match='tie_word_embeddings="false" must be true or false'):
        load_hf_config(str(p))


def test_hf_integral_float_is_accepted(tmp_path: Path) -> None:
    a = load_hf_config(str(_write_cfg(tmp_path, LLAMA3_8B)))
    b = load_hf_config(str(_write_cfg(tmp_path, {**LLAMA3_8B, "hidden_size": 4096.0, "vocab_size": 128256.0})))
    assert b == a and isinstance(b.hidden, int) and isinstance(b.vocab, int)


@pytest.mark.parametrize("text", ["[1, 2]", '"llama"', "null", "\ufeff" + json.dumps(LLAMA3_8B)[:-1]])
def test_hf_not_an_object(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(DistscopeError):
        load_hf_config(str(tmp_path / "config.json"))


def test_hf_nan_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(LLAMA3_8B).replace("14336", "NaN"))  # as a file on disk may spell it
    code, _, err = _cli(capsys, "estimate", "--model", str(p), "--gpus", "8")
    _one_error_line(code, err)
    assert "intermediate_size=NaN" in err


# the ModelSpec field each config key sets directly (so an accepted value must come through unchanged)
_DIRECT = {"hidden_size": "hidden", "n_embd": "hidden", "num_hidden_layers": "layers", "n_layer": "layers",
           "num_attention_heads": "heads", "n_head": "heads", "intermediate_size": "ffn_hidden",
           "vocab_size": "vocab", "num_key_value_heads": "kv_heads", "head_dim": "head_dim", "n_inner": "ffn_hidden",
           "n_positions": "max_positions"}
_OPTIONAL = ("num_key_value_heads", "head_dim", "tie_word_embeddings", "max_position_embeddings", "model_type")
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
    | st.sampled_from([4096.0, 4096.7, 0, 1, 8, 64, 2**53, 2**53 + 1, 1e300, -0.0, "4096", "llama"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _mutated_config(draw: st.DrawFn) -> tuple[dict[str, Any], str, Any]:
    base = draw(st.sampled_from([LLAMA3_8B, MIXTRAL, GPT2, NEOX, QWEN2]))
    field = draw(st.sampled_from(sorted({*base, *_OPTIONAL})))
    value = draw(_JSON)
    return {**base, field: value}, field, value


@settings(max_examples=400, **SETTINGS)
@given(_mutated_config())
def test_hf_fuzz_valid_spec_or_one_line_error(case: tuple[dict[str, Any], str, Any]) -> None:
    cfg, field, value = case
    with tempfile.TemporaryDirectory() as d:
        p = _write_cfg(Path(d), cfg)
        try:
            spec = load_hf_config(str(p))
        except DistscopeError as exc:
            assert "\n" not in str(exc)
            return
    assert isinstance(spec, ModelSpec)
    for attr in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "head_dim", "max_positions"):
        v = getattr(spec, attr)
        assert type(v) is int and v >= 0, (attr, v)
    if value is None:
        return
    gpt2 = cfg.get("model_type") == "gpt2"  # reads n_* names; the others read the long names
    if field in _DIRECT and (field == "vocab_size" or field.startswith("n_") == gpt2):
        # an accepted size is the file's number, exactly: no truncation, no bool-as-1
        assert not isinstance(value, bool) and getattr(spec, _DIRECT[field]) == value, (field, value, spec)
    if field == "tie_word_embeddings" and cfg.get("model_type") != "gpt2":
        assert spec.tied_embeddings is value


# ---- 2. CSV readers -------------------------------------------------------------------------------------

RUNS_TEXT = (VALIDATION / "published_runs.csv").read_text(encoding="utf-8")
_HEADER, *_LINES = RUNS_TEXT.splitlines()


def _ugly_header(header: str) -> str:
    """A byte-order mark and spaces around every name, as a spreadsheet export may write them."""
    return "\ufeff" + ",".join(f"  {n} " for n in header.split(","))


@pytest.mark.parametrize("name", ["", ".", "dir"])
def test_writing_to_a_directory_is_one_line(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A typer Path option turns `--out ''` into '.': that was a ValueError ("has an empty name") from deep
    inside the writer, an internal error, after the command's work was done."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    with pytest.raises(DistscopeError, match=r"^profile '.*' is a directory; give a file name$"):
        write_text(Path(name), "{}", "profile")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]


def test_header_names() -> None:
    assert header_names(["\ufeffrun_id", " gpu ", "\tarch\t", None, ""]) == ["run_id", "gpu", "arch", "", ""]


def test_validate_reads_bom_and_spaced_header(tmp_path: Path) -> None:
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([_ugly_header(_HEADER), *_LINES]) + "\n", encoding="utf-8")
    ugly = read_rows(p)
    plain = read_rows(VALIDATION / "published_runs.csv")
    assert len(ugly) == len(plain) > 10
    for (la, ra), (lb, rb) in zip(ugly, plain, strict=True):
        assert la == lb and parse_row(ra, la) == parse_row(rb, lb)


def test_validate_cli_bom_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fast = _LINES[0]  # GPT 1.7B on 32 A100s: predicts in well under a second
    p = tmp_path / "runs.csv"
    p.write_bytes(("\ufeff" + _HEADER.replace(",", " , ") + "\n" + fast + "\n").encode("utf-8"))
    code, out, err = _cli(capsys, "validate", str(p), "--json")
    assert code in (0, 1), err  # 1: the row's error is over its threshold; the file was read either way
    assert json.loads(out)["rows"][0]["run_id"] == fast.split(",")[0]


def test_csv_column_named_twice(tmp_path: Path) -> None:
    p = tmp_path / "runs.csv"
    p.write_text(_HEADER + ", run_id\n" + _LINES[0] + "\n")
    with pytest.raises(DistscopeError, match="column 'run_id' appears more than once"):
        read_rows(p)


def test_validate_row_with_a_stray_comma(tmp_path: Path) -> None:
    p = tmp_path / "runs.csv"
    p.write_text(_HEADER + "\n" + _LINES[0] + ",1,000\n")  # an unquoted thousands separator shifts cells
    [(line, raw)] = read_rows(p)
    with pytest.raises(DistscopeError, match=r"line 2 has more cells than the header"):
        parse_row(raw, line)


@pytest.mark.parametrize("text", [
    "\ufeffarrival_s,input_len,output_len\n0.5,100,10\n0,20,5\n",
    " arrival_s , input_len ,output_len \n0.5,100,10\n0,20,5\n",
    "\ufeff arrival_s,input_len , output_len\r\n0.5,100,10\r\n\r\n0,20,5\r\n",
    '\ufeff{"arrival_s": 0.5, "input_len": 100, "output_len": 10}\n{"arrival_s": 0, "input_len": 20, "output_len": 5}\n',
])
def test_trace_reads_bom_and_spaced_header(tmp_path: Path, text: str) -> None:
    p = tmp_path / "t.csv"
    p.write_bytes(text.encode("utf-8"))
    assert read_trace(str(p)) == ((0.0, 20, 5), (0.5, 100, 10))


def test_trace_row_with_extra_cells(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,input_len,output_len\n0.5,1,000,10\n")
    with pytest.raises(DistscopeError, match="line 2: more cells than the header"):
        read_trace(str(p))


def test_serve_simulate_cli_bom_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "t.csv"
    p.write_bytes(("\ufeffarrival_s, input_len, output_len\n" + "".join(f"{i * 0.1},{50 + i},8\n" for i in range(5)))
                  .encode("utf-8"))
    code, out, err = _cli(capsys, "serve", "simulate", "--model", "llama3-8b", "--trace", str(p), "--json")
    assert code == 0, err
    assert json.loads(out)


_CELLS = ["", " ", "auto", "0", "1", "2", "-1", "1.5", "nan", "inf", "1e400", "x", "gpt", "llama", "swiglu",
          "bf16", "h100", "a,b", '"', "\ufeff", "\x00", "tp", "none", "1f1b"]


@st.composite
def _csv_text(draw: st.DrawFn) -> bytes:
    """A header of real and junk names (maybe with a BOM and spaces) and rows of nasty cells, or raw bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    names = draw(st.lists(st.sampled_from([*REQUIRED, "arrival_s", "input_len", "output_len", "", " x "]),
                          min_size=0, max_size=40))
    names = [f"{' ' * draw(st.integers(0, 2))}{n}{' ' * draw(st.integers(0, 2))}" for n in names]
    buf = io.StringIO()
    w = csv.writer(buf)
    if names:
        w.writerow(names)
    for _ in range(draw(st.integers(0, 3))):
        w.writerow(draw(st.lists(st.sampled_from(_CELLS), max_size=len(names) + 2)))
    text = ("\ufeff" if draw(st.booleans()) else "") + buf.getvalue()
    return text.encode("utf-8")


@settings(max_examples=300, **SETTINGS)
@given(_csv_text())
def test_csv_fuzz_result_or_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f.csv"
        p.write_bytes(data)
        for read in (lambda: [parse_row(r, line) for line, r in read_rows(p)], lambda: read_trace(str(p))):
            try:
                read()
            except DistscopeError as exc:
                assert "\n" not in str(exc)


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.sampled_from(_CELLS), min_size=len(_HEADER.split(",")), max_size=len(_HEADER.split(",")) + 2),
       st.sets(st.integers(0, len(_HEADER.split(",")) - 1), max_size=6))
def test_validate_row_fuzz(cells: list[str], keep_real: set[int]) -> None:
    """A published row with some cells replaced by nasty ones parses or fails with one line."""
    names = _HEADER.split(",")
    real = next(csv.reader([_LINES[0]]))
    row_cells = [real[i] if i in keep_real or i >= len(cells) else cells[i] for i in range(len(names))]
    buf = io.StringIO()
    csv.writer(buf).writerows([names, row_cells + cells[len(names):]])
    _, rows = parse_csv(buf.getvalue(), "CSV", "fuzz.csv")
    for line, raw in rows:
        try:
            parse_row(raw, line)  # type: ignore[arg-type]
        except DistscopeError as exc:
            assert "\n" not in str(exc)


# ---- 3. the device table --------------------------------------------------------------------------------

DEVICES = {k: v for k, v in json.loads((REPO / "src/distscope/system/data/devices.json").read_text()).items()
           if not k.startswith("_")}


def _num(cell: str) -> float:
    return 0.0 if cell == "—" else float(cell)


def test_device_table_columns_hold_their_fields() -> None:
    from distscope.report.catalog_cli import device_rows

    header, rows = device_rows()
    assert {r[0] for r in rows} == set(DEVICES)
    for row in rows:
        assert len(row) == len(header)
        cell = dict(zip(header, row, strict=True))
        d = DEVICES[row[0]]
        for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8", "int4"):
            assert _num(cell[dtype]) == pytest.approx(d["tflops"].get(dtype, 0.0), rel=1e-6), (row[0], dtype)
        assert float(cell["HBM GiB"]) == pytest.approx(d["hbm_GiB"])
        assert float(cell["HBM GB/s"]) == pytest.approx(d["hbm_GBps"])
        assert float(cell["usable GiB"]) == pytest.approx(d.get("usable_MiB", d["hbm_GiB"] * 1024) / 1024, rel=1e-3)


def test_clusters_prints_h100_hbm_in_its_column() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "250"}
    r = subprocess.run([sys.executable, "-m", "distscope", "clusters"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(line for line in lines if "HBM GiB" in line)
    row = next(line for line in lines if line.strip("│ ").startswith("h100-sxm5-80gb"))
    cells = dict(zip((c.strip() for c in header.split("┃")), (c.strip() for c in row.split("│")), strict=True))
    assert cells["HBM GiB"] == "80" and cells["HBM GB/s"] == "3350"
    assert cells["fp8"] == "1978.9" and cells["int8"] == "1978.9" and cells["fp4"] == "—" and cells["int4"] == "—"


# ---- 4. no torch: the install hint ----------------------------------------------------------------------

_NO_TORCH = ("import sys\nsys.modules['torch'] = None  # as on the light install: any import of torch fails\n"
             "from distscope.cli import main\nmain(sys.argv[1:])\n")


@pytest.mark.parametrize("argv", [
    ["measure", "collectives", "--nproc", "1", "--max-bytes", "1024", "--iters", "1", "--timeout-s", "60"],
    ["compress", "bench", "--quick"],
])
def test_torch_commands_without_torch_give_the_install_hint(argv: list[str]) -> None:
    # a subprocess, so that blocking torch cannot leak into the tests that import it
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DISTSCOPE_PROGRESS": "0"}
    r = subprocess.run([sys.executable, "-c", _NO_TORCH, *argv], capture_output=True, text=True, env=env, timeout=180)
    _one_error_line(r.returncode, r.stderr)
    assert f"`distscope {argv[0]} {argv[1]}` needs torch" in r.stderr
    assert "pip install 'distscope[torch]'" in r.stderr and "CPU build" in r.stderr


def test_an_unrelated_missing_module_is_still_a_bug() -> None:
    from distscope.cli import _missing_extra

    assert _missing_extra(ModuleNotFoundError("No module named 'foo'", name="foo"), ["estimate"]) is None
    assert _missing_extra(ValueError("torch"), ["estimate"]) is None
    hint = _missing_extra(ModuleNotFoundError("x", name="torch.distributed"), ["measure", "kernels", "--x"])
    assert hint is not None and hint.startswith("distscope: error: `distscope measure kernels` needs torch")
