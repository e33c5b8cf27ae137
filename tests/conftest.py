import pathlib

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis times every example against a 200 ms deadline and health-checks how long data generation
# takes: wall-clock bounds that a shared 2-core host misses under load, whatever the code does. Tests here
# check correctness, not speed (speed is benchmarks/' job), so neither applies; a test's own @settings
# still sets everything else.
settings.register_profile("distscope", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("distscope")

REPO = pathlib.Path(__file__).resolve().parents[1]
VALIDATION = REPO / "data" / "validation"


@pytest.fixture(scope="session")
def validation_dir() -> pathlib.Path:
    """The repo's copy of the validation data (data/validation; kept equal to ../shared/validation)."""
    return VALIDATION
