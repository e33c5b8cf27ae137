import pathlib

import pytest

from tests.conftest import VALIDATION


@pytest.fixture(scope="session")
def runs_csv() -> pathlib.Path:
    """data/validation/published_runs.csv in the repo."""
    return VALIDATION / "published_runs.csv"
