"""The evidence envelope shipped in model/data equals a rebuild from the repo's CSVs, and plans above it
are flagged (issue 9: GPT-3 175B on 64 A100s predicted ~70% MFU where the published run measured 51%)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from distscope.validate.envelope import build, outside

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_envelope_is_the_rebuild() -> None:
    shipped = json.loads(resources.files("distscope.model").joinpath("data/evidence_envelope.json").read_text())
    rebuilt = build([ROOT / "data/validation/published_runs.csv", ROOT / "data/evidence/training_runs.csv"])
    assert shipped["envelope"] == rebuilt


def test_flags_above_the_best_measured() -> None:
    assert outside("a100-sxm4-80gb", "bf16", 0.70) is not None
    assert outside("a100-sxm4-80gb", "fp16", 0.40) is None
    assert "no published run" in (outside("v100-sxm2-32gb", "fp16", 0.3) or "")
