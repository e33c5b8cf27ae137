"""Record one training step of a running PyTorch job: host execution trace + Kineto trace per rank.

    with distscope.trace.capture("cap/"):      # in a script you instrument: the block is the step
        loss = model(x).sum(); loss.backward(); opt.step()

`distscope trace capture --out DIR --step N -- torchrun ... train.py` does the same in every worker of an
unmodified script (trace/_shim/sitecustomize.py calls `install()`): a profiled step is the one that
starts when the N-th `optimizer.step()` returns and ends when the next one returns; with
--profiled-steps K, steps N .. N+K-1 are each recorded into DIR/profiled/<k>/ and postprocessing keeps
the median one (trace/capture_files.choose_profiled_step).

Per rank it writes into the output folder: `host.<rank>.json` (torch.profiler.ExecutionTraceObserver),
`kineto.<rank>.json` (torch.profiler, CPU and, when present, CUDA activities), `meta.<rank>.json` (the
measured step time, torch version, world size) and, at exit, the comm log `calls/rank<rank>.<pid>.json`
(`distscope measure log` format). A CommLogger with annotations runs all along (see measure/logger.py):
its record functions name the process group of every collective. `postprocess(...)` turns the files
into Chakra ET (see trace/capture_files.py).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from distscope.measure.logger import CommLogger
from distscope.trace.from_capture import STEP_MARK


def _uses_cuda() -> bool:
    """Whether the job runs on a GPU (it has made a CUDA context: a CPU job on a GPU host has not)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else int(os.environ.get("RANK", "0"))


def _backend() -> str:
    import torch.distributed as dist

    return str(dist.get_backend()) if dist.is_available() and dist.is_initialized() else ""


def _world() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


_STARTS = itertools.count()


def _store_barrier(key: str, timeout_s: float = 300.0) -> None:
    """Start every rank's step together (the simulator starts them together): the ranks meet in the job's
    c10d store, not in a collective, so nothing shows in the comm log or the traces. Profiler start-up
    takes a different time on each rank; without this the ranks' steps would start skewed by it."""
    import datetime

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    store = dist.distributed_c10d._get_default_store()
    if store.add(key, 1) == dist.get_world_size():
        store.set(key + "/go", "1")
    store.wait([key + "/go"], datetime.timedelta(seconds=timeout_s))


class _Recorder:
    """Starts/stops the execution-trace observer, the Kineto profiler and the step record function."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self._prof: Any = None
        self._et: Any = None
        self._mark: Any = None
        self._t0 = 0.0
        self.done = False
        self.cost: dict[str, Any] = {}

    def start(self, cost: dict[str, Any] | None = None) -> None:
        """Start recording; `cost`: the profiler's per-op cost calibrated for an earlier step of this
        capture (else it is calibrated now)."""
        from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

        from distscope.trace.profiler_cost import calibrate

        rank = _rank()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if _uses_cuda() else [])
        # what the profiler adds per op, on this host now (trace/profiler_cost.py)
        self.cost = cost or calibrate(acts)
        et = self._et = ExecutionTraceObserver().register_callback(str(self.out_dir / f"host.{rank}.json"))
        self._prof = profile(activities=acts, record_shapes=True, execution_trace_observer=et)
        self._prof.start()
        if _uses_cuda():
            # the profiler's first CUDA calls set up CUPTI (2-3 ms on an H200 host): outside the step
            torch.ones(1, device=torch.cuda.current_device()).add_(1).item()
        _store_barrier(f"distscope_capture/{next(_STARTS)}")  # every rank starts captures in the same order
        # the measured step spans the step record function's enter and exit: the execution-trace observer
        # writes its node on enter (0.05-0.7 ms), inside the Kineto window the simulated step replays
        self._t0 = time.perf_counter()
        self._mark = torch.autograd.profiler.record_function(STEP_MARK)
        self._mark.__enter__()

    def stop(self, step: int | None) -> None:
        if self._prof is None or self.done:
            return
        if _uses_cuda():
            torch.cuda.synchronize()
        self._mark.__exit__(None, None, None)
        step_s = time.perf_counter() - self._t0
        self._prof.stop()
        self._et.unregister_callback()  # finalizes the host trace's JSON
        rank = _rank()
        self._prof.export_chrome_trace(str(self.out_dir / f"kineto.{rank}.json"))
        meta = {
            "rank": rank,
            "world_size": _world(),
            "step": step,
            "step_s": step_s,
            "torch": torch.__version__,
            "pid": os.getpid(),
            "host": socket.gethostname(),  # comm-log clocks are compared only between ranks of one host
            "backend": _backend(),
            "profiler_cost": self.cost,
        }
        (self.out_dir / f"meta.{rank}.json").write_text(json.dumps(meta) + "\n")
        self.done = True

    @property
    def started(self) -> bool:
        return self._prof is not None

    def abandon(self) -> None:
        """Stop a recording the job never finished (it exited inside a profiled step): no meta file, so
        the step is left out; a profiler left running at interpreter exit crashes the process."""
        if self._prof is None or self.done:
            return
        self._mark.__exit__(None, None, None)
        self._prof.stop()
        self._et.unregister_callback()
        self.done = True


class CaptureLogger(CommLogger):
    """A CommLogger (annotated) that records `profiled` consecutive steps from step `step` (counted in
    optimizer.step() calls) with the profiler, each into its own folder (`tries_dir`; the folder itself
    when only one is), and times every other step without it: the interval between consecutive
    optimizer.step() returns, per rank. The first `warmup` intervals (start-up, first iterations) are
    left out; the profiler's start-up and export are outside every interval. At exit the timings go to
    `steps.<rank>.json` (the unprofiled ground truth the replay is compared with)."""

    def __init__(self, out_dir: Path, *, step: int, warmup: int = 0, profiled: int = 1,
                 dims: dict[str, list[list[int]]] | None = None, watchdog_timeout_s: float | None = None) -> None:
        from distscope.trace.capture_files import tries_dir

        super().__init__(dims=dims, annotate=True, watchdog_timeout_s=watchdog_timeout_s,
                         dump_path=out_dir / "calls" / f"rank{os.environ.get('RANK', '0')}.{os.getpid()}.json")
        self.out_dir = out_dir
        self.capture_step = step
        self.warmup = warmup
        self.tries = [_Recorder(out_dir)] if profiled == 1 else [_Recorder(tries_dir(out_dir) / str(i))
                                                                 for i in range(profiled)]
        self.step_times_s: list[float] = []  # interval k ends at the (k+1)-th optimizer.step() return
        self._last = time.perf_counter()
        self.rank = _rank()

    def __enter__(self) -> CaptureLogger:
        super().__enter__()
        if self.capture_step == 0:
            self.tries[0].start()
            self._last = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        for t in self.tries:
            t.abandon()
        super().__exit__(*exc)
        self.write_steps()

    def _on_step(self, *a: Any) -> None:
        super()._on_step(*a)
        if _uses_cuda():
            # a GPU step ends when its kernels do: optimizer.step() returns while they are still queued,
            # and an unsynchronized host clock times one step short and the next long (an H200 capture
            # saw 21 ms and 220 ms steps alternate in a job whose every step ran 220 ms)
            torch.cuda.synchronize()
        self.step_times_s.append(time.perf_counter() - self._last)
        self.rank = _rank()  # remembered: at exit the job may have destroyed its process group
        ended, begins = self._step - self.capture_step - 1, self._step - self.capture_step
        if 0 <= ended < len(self.tries):
            self.tries[ended].stop(self.capture_step + ended)
        if 0 <= begins < len(self.tries) and not self.tries[begins].done:
            self.tries[begins].start(self.tries[0].cost or None)  # calibrated once, before the first
        self._last = time.perf_counter()

    def write_steps(self) -> None:
        """steps.<rank>.json: every interval, which are warm-up and which one was profiled. Written even with
        no step timed: it records that this rank exited through the interpreter (capture_files.ranks_that_exited)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        data = {"rank": self.rank, "step_s": self.step_times_s, "warmup": self.warmup,
                "profiled": [self.capture_step + i for i, t in enumerate(self.tries) if t.started]}
        (self.out_dir / f"steps.{self.rank}.json").write_text(json.dumps(data) + "\n")


def install() -> None:
    """Called in every torchrun worker under `distscope trace capture` (environment set by the CLI)."""
    from distscope.measure.groups import parse_dim_map

    out_dir = Path(os.environ["DISTSCOPE_CAPTURE_DIR"])
    logger = CaptureLogger(
        out_dir,
        step=int(os.environ.get("DISTSCOPE_CAPTURE_STEP", "1")),
        warmup=int(os.environ.get("DISTSCOPE_CAPTURE_WARMUP", "0")),
        profiled=int(os.environ.get("DISTSCOPE_CAPTURE_PROFILED", "1")),
        dims=parse_dim_map(os.environ.get("DISTSCOPE_COMMLOG_DIMS", "")),
    )
    logger.__enter__()
    atexit.register(logger.__exit__, None, None, None)


@contextmanager
def capture(out_dir: str | Path, *, postprocess: bool = True) -> Iterator[Path]:
    """Record the block as one step of this rank into `out_dir`; then (by default) link and convert this
    rank's traces (`step.<rank>.et`, see trace/capture_files.py)."""
    out = Path(out_dir)
    rank = _rank()
    logger = CommLogger(annotate=True, dump_path=out / "calls" / f"rank{rank}.{os.getpid()}.json")
    recorder = _Recorder(out)
    with logger:
        recorder.start()
        try:
            yield out
        finally:
            recorder.stop(None)
    if postprocess:
        from distscope.trace.capture_files import postprocess_rank
        from distscope.trace.profiler_cost import ProfilerCost

        postprocess_rank(out, rank, cost=ProfilerCost.from_json(recorder.cost))
