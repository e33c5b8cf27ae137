"""Where every benchmark leaves its figures: `benchmarks/results/<name>.json`, plus the JSON object as
the last line of stdout. README figures are rendered from these files by `readme_figures.py`."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def save(name: str, result: dict[str, Any]) -> None:
    """Write `result` (with the machine it ran on) to results/<name>.json and print it as one line."""
    record = {**result, "machine": {"cpus": _cpus(), "platform": platform.platform(),
                                    "date": time.strftime("%Y-%m-%d")}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(result))


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
