"""Switch a CommLogger on for the whole life of a torchrun worker (used by `distscope measure log`).

Environment (set by the `log` command):
- DISTSCOPE_COMMLOG_DIR: folder; rank R writes `rank{R}.{pid}.json` there at exit (the pid keeps a
  helper process that inherits RANK, e.g. a spawned DataLoader worker, from overwriting the rank's log).
- DISTSCOPE_COMMLOG_DIMS: optional explicit group labels, 'tp=0,1|2,3;dp=0,2|1,3'.
- DISTSCOPE_COMMLOG_WATCHDOG_S: optional hang-watchdog timeout in seconds.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

from distscope.measure.groups import parse_dim_map


def install() -> None:
    from distscope.measure.logger import CommLogger

    out_dir = Path(os.environ["DISTSCOPE_COMMLOG_DIR"])
    wd = os.environ.get("DISTSCOPE_COMMLOG_WATCHDOG_S")
    logger = CommLogger(
        dims=parse_dim_map(os.environ.get("DISTSCOPE_COMMLOG_DIMS", "")),
        watchdog_timeout_s=float(wd) if wd else None,
        dump_path=out_dir / f"rank{os.environ['RANK']}.{os.getpid()}.json",
    )
    logger.__enter__()
    atexit.register(logger.__exit__, None, None, None)
