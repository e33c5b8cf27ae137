"""Collectives whose future callbacks the worker thread drops late, as a thread waiting for a core would.
argv[1]: `drain` (the logger as shipped; each drop 0.3 s late: its exit must wait for them) or `no-drain`
(the control: its wait switched off, and each drop held until the interpreter is finalizing, which the
process must not survive)."""

import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from distscope.measure import CommLogger
from distscope.measure import logger as logger_mod

dropped = logger_mod._Completion.__del__
DRAIN = sys.argv[1] == "drain"


def late_drop(self: object) -> None:
    deadline = time.monotonic() + (0.3 if DRAIN else 10.0)
    while time.monotonic() < deadline and not sys.is_finalizing():
        time.sleep(0.005)  # releases the GIL: the main thread runs on to the end meanwhile
    dropped(self)  # type: ignore[arg-type]


logger_mod._Completion.__del__ = late_drop  # type: ignore[method-assign]
if not DRAIN:
    logger_mod._Completion.drain = staticmethod(lambda logger, timeout_s=10.0: None)  # type: ignore[method-assign]
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
with CommLogger():
    t = torch.ones(1 << 16)
    if dist.get_rank() == 1:  # rank 0's works are still pending when its callbacks are added: they run, and
        time.sleep(0.5)  # are dropped, on the worker thread (a work complete before that runs them inline)
    # as DDP's comm hooks do: the program waits on a `then` of the work's future, which completes while
    # its worker thread still has the work's callbacks (the logger's among them) to drop
    futs = [dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()) for _ in range(3)]
    for f in futs:
        f.wait()
print(f"rank {dist.get_rank()} done", flush=True)
# no destroy_process_group(), as in many jobs: the worker threads outlive main
