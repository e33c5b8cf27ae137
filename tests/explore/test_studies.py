"""The README's two `explore` studies (docs/explore/) are the tool's current output, and the README's
bullets are rendered from them (benchmarks/explore_studies.py), never typed by hand:

- the README block equals the render of the committed JSON;
- each committed JSON is a complete output of its sweep file as it stands;
- a few grid points of each study, planned now through the code a sweep's workers run, give the
  committed rows byte for byte, so an estimator or planner change without a re-run fails here.

After such a change: `python benchmarks/explore_studies.py` (re-runs both studies, ~2 minutes on 2 cores).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
# cheap points (~1 s of planning each), among them the README's headline picks where they are cheap
SUBSET = {"nvlink_405b": (17, 23), "hbm_70b": (20, 71)}
RERUN = "stale: re-run `python benchmarks/explore_studies.py`"


def _studies() -> ModuleType:
    spec = importlib.util.spec_from_file_location("explore_studies", ROOT / "benchmarks" / "explore_studies.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


E = _studies()


def test_readme_block_is_the_render_of_the_committed_output() -> None:
    text = E.README.read_text()
    start, end = E.readme_block(text)
    assert text[start:end] == E.render({name: E.output_of(name) for name in E.STUDIES}), (
        "README.md's explore-studies block differs from the render: python benchmarks/explore_studies.py --render")


@pytest.mark.parametrize("name", E.STUDIES)
def test_committed_output_is_a_complete_run_of_its_sweep_file(name: str) -> None:
    from distscope.explore.sweep import sweep_json

    doc, sweep = E.output_of(name), E.sweep_of(name)
    assert doc["complete"] is True
    assert doc["sweep"] == json.loads(json.dumps(sweep_json(sweep))), f"docs/explore/{name}.yaml changed: {RERUN}"
    keys = [p.key(sweep.plan) for p in sweep.points()]
    assert [p["key"] for p in doc["points"]] == keys, f"docs/explore/{name}.json: {RERUN}"


@pytest.mark.parametrize("name", E.STUDIES)
def test_fresh_points_equal_committed_rows(name: str) -> None:
    indices = SUBSET[name]
    committed = [E.output_of(name)["points"][i] for i in indices]
    for i, fresh, old in zip(indices, E.fresh_points(name, indices), committed, strict=True):
        diff = {k: (old[k], fresh[k]) for k in old if old[k] != fresh.get(k)}
        assert not diff, f"docs/explore/{name}.json point {i} (committed, now): {diff}; {RERUN}"
