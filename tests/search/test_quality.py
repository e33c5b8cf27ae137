"""Every published run: its plan is in the planner's space and feasible, and the planner's best is
predicted no slower, both within the features the run's software had and with every feature. CI
searches a neighbourhood of each published plan (tp and pp halved, same, doubled; everything else
free) to stay fast; benchmarks/plan_quality.py runs the full search."""

from __future__ import annotations

import pathlib

import pytest

from distscope.search.quality import check_file


@pytest.fixture(scope="module", params=[False, True], ids=["every-feature", "its-software"])
def results(runs_csv: pathlib.Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return check_file(runs_csv, neighbourhood=True, era=request.param)


def test_every_row_is_checked(results) -> None:  # type: ignore[no-untyped-def]
    assert len(results) >= 51
    assert [r.run_id for r in results if r.error] == []


def test_published_plans_are_in_the_feasible_set(results) -> None:  # type: ignore[no-untyped-def]
    outside = {r.run_id: r.not_in_space for r in results if r.not_in_space}
    assert outside == {}
    assert all(r.published is not None and r.published.estimate.feasible for r in results)


def test_planner_never_worse_than_published(results) -> None:  # type: ignore[no-untyped-def]
    worse = {r.run_id: (r.published.step_time_s, r.best.step_time_s) for r in results  # type: ignore[union-attr]
             if r.best is None or r.best.step_time_s > r.published.step_time_s * (1 + 1e-9)}  # type: ignore[union-attr]
    assert worse == {}
