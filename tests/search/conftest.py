import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def runs_csv() -> pathlib.Path:
    """shared/validation/published_runs.csv beside the repo (or under $DISTSCOPE_SHARED)."""
    for base in (os.environ.get("DISTSCOPE_SHARED"), REPO.parent / "shared", REPO / "shared"):
        if base and (pathlib.Path(base) / "validation" / "published_runs.csv").is_file():
            return pathlib.Path(base) / "validation" / "published_runs.csv"
    pytest.fail(f"shared/validation/published_runs.csv not found beside the repo at {REPO.parent / 'shared'}")
