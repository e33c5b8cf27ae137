"""HTML reports open in real headless Chromium with no console errors, and every chart has data.

Chromium is Debian's package (.ci/run installs it when missing) driven by Playwright; locally the test
skips without them, under CI (CI=true) it fails. Screenshots go to the test's tmp dir and to
out/report-screenshots/ (git-ignored) as artifacts.
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


def _distscope(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reports")
    _distscope("estimate", "--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--report", str(d / "estimate.html"))
    _distscope("plan", "--model", "llama3-8b", "--gpus", "16", "--simulate-top", "0", "--top", "4",
               "--report", str(d / "plan.html"))
    _distscope("validate", str(REPO / "data/validation/published_runs.csv"), "--report", str(d / "validate.html"))
    prof = {"kind": "calibration", "profile": {"schema": "distscope.system_profile/1", "name": "t", "levels": {
        "default": {"all_reduce": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9, "max_rel_err": 0.05}}}},
            "points": [{"op": "all_reduce", "level": "default", "bytes": b, "time_s": 1e-4 + 1.1e-9 * b}
                       for b in (1024, 65536, 1 << 20, 1 << 22)]}
    (d / "calib.json").write_text(json.dumps(prof))
    _distscope("report", str(d / "calib.json"), "-o", str(d / "calibration.html"))
    return {p.stem: p for p in d.glob("*.html")}


@pytest.mark.parametrize("name", ["estimate", "plan", "validate", "calibration"])
def test_report_loads_without_errors_and_charts_have_data(reports, name, tmp_path) -> None:
    sync_playwright = _need_browser()
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(reports[name].as_uri())
        page.wait_for_selector(".plotly-graph-div", timeout=30000)
        charts = page.evaluate("""() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(d =>
            (d.data || []).some(t => ['x', 'y'].some(k => t[k] && t[k].length > 0)))""")
        shot = tmp_path / f"{name}.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    keep = REPO / "out" / "report-screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / shot.name)
    assert errors == []
    assert charts and all(charts), f"{name}: charts without data: {charts}"
    expected = {"estimate": 4, "plan": 4, "validate": 1, "calibration": 1}[name]
    assert len(charts) >= expected
