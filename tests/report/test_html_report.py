"""HTML reports open in real headless Chromium with no console errors or warnings, fetch nothing from
the network (every non-file request is aborted and fails the test), and every chart has data and drew
it (plotly's gd.data and its SVG traces, queried in the page).

Chromium is Debian's package (.ci/run installs it when missing) driven by Playwright; locally the test
skips without them, under CI (CI=true) it fails. One browser serves the module. Screenshots go to the
test's tmp dir and to out/report-screenshots/ (git-ignored) as artifacts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "120"}


def _need_browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if CHROMIUM is None or sync_playwright is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Debian's chromium and playwright (pip install 'distscope[test]')")
        pytest.skip("no chromium/playwright here")
    return sync_playwright


def _distscope(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reports")
    _distscope("estimate", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--report", str(d / "estimate.html"))
    saved = _distscope("plan", "--model", "llama3-8b", "--gpus", "16", "--simulate-top", "0", "--top", "4",
                       "--report", str(d / "plan.html"), "--json")
    (d / "plan.json").write_text(saved)  # a saved result (with its step view) redraws the same page
    _distscope("report", str(d / "plan.json"), "-o", str(d / "plan_saved.html"))
    _distscope("validate", str(REPO / "data/validation/published_runs.csv"), "--report", str(d / "validate.html"))
    _distscope("trace", "generate", "-o", str(d / "traces"), "--model", "llama3-8b", "--gpus", "16", "--tp", "2",
               "--pp", "4", "--global-batch", "32", "--symmetric")
    _distscope("simulate", str(d / "traces"), "--cluster", "dgx-h100", "--gpus", "16", "--report", str(d / "simulate.html"))
    _distscope("measure", "calibrate", str(REPO / "tests/measure/data/all_reduce_perf_8xH100.txt"), "--out",
               str(d / "profile.json"), "--report", str(d / "nccl_tests.html"))
    _distscope("report", str(d / "profile.json"), "-o", str(d / "profile.html"))
    prof = {"kind": "calibration", "profile": {"schema": "distscope.system_profile/1", "name": "t", "levels": {
        "default": {"all_reduce": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9, "max_rel_err": 0.05}}}},
            "points": [{"op": "all_reduce", "level": "default", "bytes": b, "time_s": 1e-4 + 1.1e-9 * b}
                       for b in (1024, 65536, 1 << 20, 1 << 22)]}
    (d / "calib.json").write_text(json.dumps(prof))
    _distscope("report", str(d / "calib.json"), "-o", str(d / "calibration.html"))
    return {p.stem: p for p in d.glob("*.html")}


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _need_browser()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


# report -> (charts at least, chart titles that must be there)
EXPECTED = {
    "estimate": (4, ("Where the step goes", "Memory per GPU", "Pipeline timeline", "Communication volume")),
    "plan": (4, ("step-time breakdown", "Memory per GPU", "Pipeline timeline", "Communication volume")),
    "plan_saved": (4, ("step-time breakdown", "Memory per GPU", "Pipeline timeline", "Communication volume")),
    "validate": (1, ("Predicted vs measured",)),
    "simulate": (2, ("Pipeline timeline", "Communication volume")),
    "calibration": (1, ("Calibration",)),
    "nccl_tests": (1, ("Calibration",)),
    "profile": (1, ("Calibration",)),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_report_loads_without_errors_and_charts_have_data(reports, browser, name, tmp_path) -> None:
    problems: list[str] = []
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
               else (problems.append(f"network request {r.request.url}"), r.abort()))
    page.goto(reports[name].as_uri())
    page.wait_for_selector(".plotly-graph-div", timeout=30000)
    page.wait_for_function("() => [...document.querySelectorAll('.plotly-graph-div')].every(d => d._fullLayout)",
                           timeout=30000)
    charts = page.evaluate("""() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(d => ({
        title: (d.previousElementSibling || {}).textContent || d.id,
        data: (d.data || []).some(t => ['x', 'y'].some(k => t[k] && t[k].filter(v => v !== null).length > 0)),
        drawn: d.querySelectorAll('g.trace').length}))""")
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    keep = REPO / "out" / "report-screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / shot.name)
    assert problems == []
    assert charts and all(c["data"] and c["drawn"] for c in charts), f"{name}: charts without data: {charts}"
    least, titles = EXPECTED[name]
    assert len(charts) >= least
    headings = " | ".join(page_h2(reports[name]))
    assert all(t in headings for t in titles), f"{name}: {headings}"


def page_h2(path: Path) -> list[str]:
    import re

    return re.findall(r"<h2>(.*?)</h2>", path.read_text())
