"""`distscope report` and `--report` without a browser: one-line errors for bad or foreign JSON, the
core importing without plotly, and progress that is silent off a terminal and changes no result."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from distscope import scenario as S
from distscope.cli import main


def run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"hello": 1}', "is not the --json output"),
    ('{"best": {}, "top": [{"tp": 1}]}', "plan JSON is incomplete or malformed"),
    ('{"schema": "distscope.system_profile/1", "levels": {"default": {"all_reduce": 3}}}', "malformed"),
])
def test_bad_result_is_one_line(tmp_path, capsys, content, message):
    pytest.importorskip("plotly")
    src = tmp_path / "r.json"
    src.write_text(content)
    assert run(["report", str(src), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("distscope: error:") and message in err[0], err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("out", ["", "r.json", "."])
def test_report_out_without_an_html_name_names_the_out_option(tmp_path, capsys, out):
    pytest.importorskip("plotly")
    src = tmp_path / "r.json"
    src.write_text('{"hello": 1}')
    assert run(["report", str(src), "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"distscope: error: --out={out!r} must end in .html"], err


def test_core_imports_without_plotly_and_report_names_the_extra(tmp_path):
    """With plotly unimportable the CLI still imports and runs; --report is one line naming the extra."""
    code = ("import sys; sys.modules['plotly'] = None\n"
            "import distscope.cli, distscope.report.html, distscope.report.progress\n"
            "from distscope.cli import main\n"
            f"main(['estimate', '--report', {str(tmp_path / 'r.html')!r}])\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'distscope[report]'" in lines[0], p.stderr


def test_progress_is_silent_off_a_terminal(capsys, monkeypatch):
    from distscope.report.progress import progress

    monkeypatch.delenv("DISTSCOPE_PROGRESS", raising=False)
    with progress(3, "work") as advance:
        assert not advance.shown
        advance()
        advance.update(3, 3)
    assert capsys.readouterr().err == ""


def test_simulation_progress_reports_batches_and_changes_nothing(monkeypatch):
    from distscope.sim import engine
    from distscope.sim.api import run_traces
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.sim.network import NetworkMode
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec

    sc = S.build_scenario(S.WorkloadFlags(model="llama3-8b", global_batch=32), S.SystemFlags(cluster="dgx-h100", gpus=16),
                          S.PlanFlags(tp=2, pp=4, sequence_parallel=False, zero=1, distributed_optimizer=False,
                                      recompute="none", overlap="dp,tp,pp", attention="flash"))
    built: list[int] = []
    traces = build_traces(step_spec(sc.spec, sc.shape, sc.cluster, sc.plan), on_rank=lambda: built.append(1))
    assert len(built) == 16
    plain = run_traces(traces, ClusterNetwork(sc.cluster), mode=NetworkMode.SHARED)
    monkeypatch.setattr(engine, "PROGRESS_EVENTS", 100)  # many batches on a small step
    seen: list[tuple[int, int]] = []
    reported = run_traces(traces, ClusterNetwork(sc.cluster), mode=NetworkMode.SHARED,
                          progress=lambda d, t: seen.append((d, t)))
    assert len(seen) > 5 and seen[-1][0] == seen[-1][1]
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))
    assert reported.events == plain.events
    assert [t.end for t in reported.times] == [t.end for t in plain.times]
