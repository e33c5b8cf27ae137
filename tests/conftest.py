import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
VALIDATION = REPO / "data" / "validation"


@pytest.fixture(scope="session")
def validation_dir() -> pathlib.Path:
    """The repo's copy of the validation data (data/validation; kept equal to ../shared/validation)."""
    return VALIDATION
