"""The repo carries its own copy of the validation data (a user's clone has no ../shared).

When the steering repo's ../shared/validation sits beside the checkout, the copy must equal it file
for file, so a change upstream cannot be silently missed.
"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, VALIDATION

SHARED = REPO.parent / "shared" / "validation"


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_repo_copy_has_the_data_tests_use() -> None:
    for name in ("README.md", "published_runs.csv", "nccl_collectives.csv", "serving_runs.csv",
                 "astra_sim/astra_sim_reference.csv"):
        assert (VALIDATION / name).is_file(), name


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/validation beside this checkout")
def test_repo_copy_matches_shared() -> None:
    ours, theirs = _files(VALIDATION), _files(SHARED)
    missing = sorted(set(theirs) - set(ours))
    differ = sorted(k for k in set(theirs) & set(ours) if theirs[k] != ours[k])
    assert not missing and not differ, f"data/validation out of date: missing {missing}, differing {differ}"
