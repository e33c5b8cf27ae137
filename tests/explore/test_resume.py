"""Outputs, resume and atomicity: a killed sweep leaves no complete-looking output, restarts from its
journal, skips done points and ends with the same bytes as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from distscope.explore.formats import Format, read_results
from distscope.explore.store import JOURNAL_FORMAT
from tests.explore.explore_support import SMALL, cli, spawn


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The six-point sweep, uninterrupted, in each format (one planning run, the rest resumed)."""
    d = tmp_path_factory.mktemp("ref")
    code, _, err = cli([*SMALL, "--workers", "1", "--out", str(d / "s.json")])
    assert code == 0, err
    out = {"json": (d / "s.json").read_bytes()}
    results = read_results(d / "s.json", Format.JSON)
    for fmt in ("csv", "parquet"):
        if fmt == "parquet":
            pytest.importorskip("pyarrow")
        # the other formats from the same results, through the resume path (a journal holding every point)
        lines = [json.dumps({"format": JOURNAL_FORMAT})] + [json.dumps({"key": k, "result": r}) for k, r in results.items()]
        (d / f"s.{fmt}.partial.jsonl").write_text("\n".join(lines) + "\n")
        code, _, err = cli([*SMALL, "--out", str(d / f"s.{fmt}")])
        assert code == 0 and "(6 already done, 0 planned)" in err, err
        out[fmt] = (d / f"s.{fmt}").read_bytes()
    return out


def test_json_shape(reference) -> None:
    d = json.loads(reference["json"])
    assert d["complete"] is True and d["format"] == "distscope.explore/1"
    assert [p["index"] for p in d["points"]] == list(range(6))
    p = d["points"][0]
    assert {"nic_GBps", "hbm_GBps", "step_time_s", "tokens_per_s", "cost", "energy_MWh", "best_plan"} <= set(p)
    assert {"tp", "pp", "dp", "compression"} <= set(p["best_plan"])
    assert d["pareto"]["time_cost"] and set(d["pareto"]["time_cost"]) <= set(range(6))


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_rerun_resumes_everything_and_rewrites_the_same_bytes(tmp_path, reference, fmt: str) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"s.{fmt}"
    out.write_bytes(reference[fmt])
    code, _, err = cli([*SMALL, "--out", str(out)])
    assert code == 0, err
    assert "(6 already done, 0 planned)" in err
    assert out.read_bytes() == reference[fmt]


def test_grown_grid_plans_only_the_new_points(tmp_path, reference) -> None:
    out = tmp_path / "s.json"
    out.write_bytes(reference["json"])
    grown = [a if a != "hbm_GBps=2000,3000" else "hbm_GBps=2000,3000,4000" for a in SMALL]
    code, _, err = cli([*grown, "--workers", "1", "--out", str(out)])
    assert code == 0, err
    assert "(6 already done, 3 planned)" in err
    assert len(json.loads(out.read_text())["points"]) == 9


def test_killed_sweep_resumes_to_the_same_output(tmp_path, reference) -> None:
    out = tmp_path / "s.json"
    journal = tmp_path / "s.json.partial.jsonl"
    # one worker: batches of two points, journaled as each finishes; kill after the first batch lands
    proc = spawn([*SMALL, "--workers", "1", "--out", str(out)])
    # waits for the event, not for a time: the deadline only guards against a hang (the first point lands
    # ~1 s after the start on an idle host; starting the interpreter alone took ~15 s under load on 2026-11-25)
    deadline = time.monotonic() + 600
    while proc.poll() is None:
        if journal.exists() and journal.read_bytes().count(b"\n") >= 2:  # header + at least one point
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("explore journaled no point within 600 s")
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.skip("the sweep finished before it could be killed (machine too fast for this test)")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not out.exists(), "a killed sweep must not leave an output that looks complete"
    done_lines = journal.read_bytes().count(b"\n") - 1
    assert 1 <= done_lines < 6
    with journal.open("ab") as f:  # as if killed mid-line: a torn last line is ignored
        f.write(b'{"key": "torn')
    code, _, err = cli([*SMALL, "--workers", "1", "--out", str(out)])
    assert code == 0, err
    assert f"({done_lines} already done, {6 - done_lines} planned)" in err
    assert out.read_bytes() == reference["json"]
    assert not journal.exists()


def test_fresh_ignores_previous_results(tmp_path, reference) -> None:
    out = tmp_path / "s.json"
    out.write_bytes(reference["json"])
    code, _, err = cli([*SMALL[:6], "--vary", "nic_GBps=25", "--fresh", "--workers", "1", "--out", str(out)])
    assert code == 0 and "(0 already done, 1 planned)" in err


@pytest.mark.parametrize(("name", "content", "msg"), [
    ("x.json", '{"a": 1}', "is not a complete distscope explore output"),
    ("x.csv", "hello\nworld\n", "is not a complete distscope explore output"),
    ("x.html", "", "the extension must be one of .json, .csv, .parquet"),
])
def test_existing_foreign_output_is_not_clobbered(tmp_path, name: str, content: str, msg: str) -> None:
    out = tmp_path / name
    out.write_text(content)
    code, _, err = cli([*SMALL[:6], "--out", str(out)])
    assert code == 2 and msg in err and err.strip().count("\n") == 0
    assert out.read_text() == content


def test_out_must_be_a_regular_file_in_an_existing_directory(tmp_path) -> None:
    for bad, msg in (("/dev/null.json", "exists and is not"), (str(tmp_path / "nodir" / "x.json"), "does not exist"),
                     (str(tmp_path), "the extension")):
        if bad == "/dev/null.json" and not Path(bad).exists():
            bad, msg = str(tmp_path / "adir.json"), "exists and is not"
            Path(bad).mkdir()
        code, _, err = cli([*SMALL[:6], "--out", bad])
        assert code == 2 and msg in err, (bad, err)
