import os
import pathlib

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis times every example against a 200 ms deadline and health-checks how long data generation
# takes: wall-clock bounds that a shared 2-core host misses under load, whatever the code does. Tests here
# check correctness, not speed (speed is benchmarks/' job), so neither applies; a test's own @settings
# still sets everything else.
settings.register_profile("distscope", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("distscope")

# pytest-xdist's workers start with COLUMNS=80, and rich fixes a Console's width from COLUMNS when the
# Console is made (distscope.report.console's, at import): the tests that give the CLI a wider COLUMNS
# would get 80 in a worker. Without it in the environment, rich reads COLUMNS at each print.
os.environ.pop("COLUMNS", None)

REPO = pathlib.Path(__file__).resolve().parents[1]
VALIDATION = REPO / "data" / "validation"

# Tests that time this host (a measured step or sweep, a prediction checked against a measurement, a bounded
# wait) are marked `serial`. The README's test command runs everything else on both cores (pytest-xdist),
# then these alone, so that no neighbour on the other core is measured with them. Multi-process tests
# that check only results (bytes, losses, codecs) run in parallel with the rest: slower, not wrong.
SERIAL = ("tests/trace/test_capture_job.py", "tests/measure/test_faults.py", "tests/measure/test_sweep_calibration.py",
          "tests/measure/test_algo_choice.py", "tests/measure/test_capture.py", "tests/measure/test_logger_exit.py",
          "tests/serve/test_serve_measure.py", "tests/serve/test_cpu_serving.py", "tests/explore/test_ray.py",
          "tests/explore/test_ray_interrupt.py", "tests/explore/test_resume.py")


@pytest.hookimpl(tryfirst=True)  # before the mark plugin deselects by `-m`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(REPO).as_posix().startswith(SERIAL):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def validation_dir() -> pathlib.Path:
    """The repo's copy of the validation data (data/validation; kept equal to ../shared/validation)."""
    return VALIDATION
