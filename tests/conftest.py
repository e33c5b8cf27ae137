import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    if not (SHARED / "validation").is_dir():
        pytest.fail(f"shared/ not found beside the repo at {SHARED}")
    return SHARED
