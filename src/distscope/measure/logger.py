"""CommLogger: record every collective and p2p call a real torch.distributed program issues.

How it sees everything: `dist.*` calls, DDP's C++ Reducer (`ProcessGroup::allreduce` -> dispatcher op
`c10d::allreduce_`), FSDP2 (`c10d::_allgather_base_`, `c10d::_reduce_scatter_base_`) and
`torch.distributed.pipelining` (`c10d::send` / `c10d::recv_`) all go through the dispatcher. While the
logger is active it registers (torch.library) a Python kernel for the `Autograd` dispatch key of every
comm op listed in `distscope.measure.c10d_ops`; the kernel records the call and re-dispatches below
autograd to the real backend kernel. This sees calls from any thread, including C++ callers, and costs
nothing on non-comm ops (a TorchDispatchMode, tried first, also worked but taxed every aten op: 2x on a
small DDP step). Patching `dist.all_reduce` in Python would miss DDP. Limitation: inference tensors
(created under `torch.inference_mode()`) carry no autograd key, so comm on them is not seen.

No per-op synchronization: the end time comes from a done-callback on the Work's future; for Works
without a future (gloo send/recv, gloo reduce_scatter_tensor) from a monitor thread polling
`Work.is_completed()` every `poll_interval_s`, or, when the backend never sets that flag (gloo
reduce_scatter_tensor in torch 2.13), from the moment the program's own `Work.wait()` returns (an upper
bound on completion; `Work.wait` is wrapped while the logger is active, pybind hands the program the same
Work object the logger saw). The program's own overlap is left intact.

With `annotate=True` (used by `distscope trace capture`) each call also runs inside a record function
`distscope::comm pg=<group> seq=<n> dim=<label> ranks=<r,r,..>` and each Python `Work.wait()` /
`wait_tensor` inside `distscope::wait pg=<group> seq=<n>`, so an execution trace of the job names the
process group of every collective and which call each wait waits for (gloo records neither).

Optional hang watchdog (`watchdog_timeout_s`): each call also writes `(group, seq, rank) -> op:bytes`
into the job's c10d store; a call still open after the timeout makes the rank print which ranks of the
group never arrived (or arrived at a different op) and exit with `HANG_EXIT_CODE`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from distscope.comm.collective import Collective
from distscope.measure.c10d_ops import C10D_OPS, FUNCTIONAL_OPS, CommOpSpec
from distscope.measure.calls import CommCall, save_calls
from distscope.measure.groups import GroupLabeler

HANG_EXIT_CODE = 75
_C10D = torch._C._distributed_c10d


def _peer(spec: CommOpSpec, bound: dict[str, Any], ranks: tuple[int, ...]) -> int | None:
    """The global rank a send goes to or a recv comes from (its group-local dst / src argument)."""
    if spec.op not in (Collective.SEND, Collective.RECV):
        return None
    names = ("dst", "dstRank") if spec.op is Collective.SEND else ("src", "srcRank")
    local = next((bound[k] for k in names if k in bound), None)
    return ranks[local] if isinstance(local, int) and 0 <= local < len(ranks) else None


def _tensor_bytes(value: Any) -> tuple[int, str]:
    """Total bytes of a tensor or nested lists of tensors, and the dtype of the first one."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size(), str(value.dtype).removeprefix("torch.")
    total, dtype = 0, ""
    if isinstance(value, (list, tuple)):
        for v in value:
            b, d = _tensor_bytes(v)
            total += b
            dtype = dtype or d
    return total, dtype


@dataclasses.dataclass(eq=False, slots=True, kw_only=True)
class _Open:
    """A call issued and not yet known to be complete (mutable until closed; identity-hashed)."""

    op: Collective
    nbytes: int
    dtype: str
    group: str
    ranks: tuple[int, ...]
    dim: str
    seq: int
    step: int
    start_s: float
    start_perf: float
    api: str
    peer: int | None = None  # send / recv: the other rank (global)
    work: Any = None
    end_perf: float | None = None
    error: str | None = None


def _comm_label(rec: _Open) -> str:
    ranks = ",".join(map(str, rec.ranks))
    return f"distscope::comm pg={rec.group} seq={rec.seq} dim={rec.dim} ranks={ranks} op={rec.op.value}"


def _wait_label(rec: _Open) -> str:
    return f"distscope::wait pg={rec.group} seq={rec.seq}"


_CEA = torch._C.DispatchKey.CompositeExplicitAutograd
_FUNCTIONAL_KEYS = ("CPU", "CUDA")


def _register_kernels(logger: CommLogger) -> list[torch.library.Library]:
    """Python kernels on every comm op this torch build has; removed (Library._destroy) on logger exit.

    c10d ops: an `Autograd` kernel that re-dispatches below autograd to the backend kernel.
    Functional ops (and wait_tensor, for their end time): they have a CompositeExplicitAutograd kernel and,
    once DTensor is imported, a real Autograd kernel, so the hook goes on the CPU/CUDA keys (which win
    over CompositeExplicitAutograd) and calls that composite kernel itself.
    """
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    c10d = torch.library.Library("c10d", "IMPL")
    for name in C10D_OPS:
        if not hasattr(torch.ops.c10d, name) or has(f"c10d::{name}", "Autograd"):
            continue  # absent in this build, or it has a real autograd kernel we must not replace
        func = getattr(torch.ops.c10d, name).default

        def kernel(*args: Any, _func: Any = func, **kwargs: Any) -> Any:
            with torch._C._AutoDispatchBelowAutograd():
                return logger._intercept(_func, args, kwargs, lambda: _func._op(*args, **kwargs))

        c10d.impl(name, kernel, "Autograd")
    fun = torch.library.Library("_c10d_functional", "IMPL")
    for name in [*FUNCTIONAL_OPS, "wait_tensor"]:
        qual = f"_c10d_functional::{name}"
        if not hasattr(torch.ops._c10d_functional, name) or not has(qual, "CompositeExplicitAutograd"):
            continue
        func = getattr(torch.ops._c10d_functional, name).default

        def fkernel(*args: Any, _func: Any = func, **kwargs: Any) -> Any:
            return logger._intercept(_func, args, kwargs, lambda: _func._op_dk(_CEA, *args, **kwargs))

        for key in _FUNCTIONAL_KEYS:
            if not has(qual, key):
                fun.impl(name, fkernel, key)
    return [c10d, fun]


class _Completion:
    """The done-callback on one collective's future: records the end time (or the failure) of `rec`.

    A c10d worker thread (gloo's, NCCL's watchdog) runs it and then drops it, taking the GIL to do so. A
    thread that takes the GIL after the interpreter has begun finalizing is ended by CPython mid-destructor,
    and the process dies of SIGABRT ("terminate called without an active exception"). The program can be
    ahead of that thread: a DDP comm hook waits on a `then` of the future, which completes before the
    thread drops the future's earlier callbacks (this one). A 2-rank gloo job whose callbacks are dropped
    once finalization has begun aborts; with every drop 0.3 s late it exits cleanly through the wait below
    (tests/measure/test_logger_exit.py). Under CPU load the thread can wait that long for a core (rank 2
    of a 4-rank fp16-hook capture on a loaded 2-core host aborted so in CI, 2026-11-27). `drain` waits in
    the logger's exit, which runs before finalization (a context manager, or the capture's atexit hook),
    until every callback that has run has been dropped. (One that never runs, on a collective that never
    completes, is dropped with its future by whoever drops that; the exit does not wait for it.)"""

    def __init__(self, logger: CommLogger, rec: _Open) -> None:
        self._logger, self._rec, self._ran = logger, rec, False

    def __call__(self, f: Any) -> None:
        with self._logger._callbacks_lock:  # counted before the record closes: the exit waits for both
            self._logger._callbacks_to_drop += 1
            self._ran = True
        try:
            f.value()
        except Exception as exc:  # the collective failed (peer died, timeout): keep the reason
            self._rec.error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        self._logger._close(self._rec)

    def __del__(self) -> None:  # on whichever thread drops it
        if self._ran:
            with self._logger._callbacks_lock:
                self._logger._callbacks_to_drop -= 1

    @staticmethod
    def drain(logger: CommLogger, timeout_s: float = 10.0) -> None:
        """Wait until every callback that ran is dropped; then give the thread that dropped the last one a
        moment more, since the program's own callbacks on the same future (a DDP comm hook's `then`) are
        dropped by it right after ours."""
        deadline = time.perf_counter() + timeout_s
        while logger._callbacks_to_drop > 0 and time.perf_counter() < deadline:
            time.sleep(0.001)
        time.sleep(0.02)


class CommLogger:
    """Context manager that logs comm calls on this rank. Use `calls()` afterwards.

    dims: explicit {dim: [[ranks], ...]}; meshes: DeviceMeshes whose dim names label their groups.
    DeviceMeshes created while the logger is active are picked up automatically.
    """

    def __init__(
        self,
        *,
        dims: Mapping[str, Sequence[Sequence[int]]] | None = None,
        meshes: Sequence[Any] = (),
        watchdog_timeout_s: float | None = None,
        poll_interval_s: float = 0.0005,
        dump_path: Path | None = None,
        annotate: bool = False,
    ) -> None:
        self._annotate = annotate
        # id(Work) -> (the Work, kept alive so pybind hands the program this very object, its record)
        self._rec_of_work: dict[int, tuple[Any, _Open]] = {}
        self._labeler = GroupLabeler(dims=dims, meshes=meshes)
        self._watchdog_timeout_s = watchdog_timeout_s
        self._poll_interval_s = poll_interval_s
        self._dump_path = dump_path
        self._records: list[_Open] = []
        self._open: set[_Open] = set()
        self._polled: list[_Open] = []
        self._seq: dict[str, int] = {}
        self._groups: dict[str, tuple[int, ...]] = {}
        self._step = 0
        self._rank: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._monitor: threading.Thread | None = None
        self._libs: list[torch.library.Library] = []
        self._hook: Any = None
        self._orig_mesh_init: Callable[..., None] | None = None
        self._orig_wait: Callable[..., Any] | None = None
        self._by_work: dict[int, _Open] = {}
        self._callbacks_to_drop = 0  # future callbacks (_Completion) that have run and are not yet dropped
        self._callbacks_lock = threading.Lock()
        self._by_storage: dict[int, _Open] = {}
        self._tls = threading.local()
        self._arg_names: dict[Any, list[str]] = {}

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> CommLogger:
        from torch.distributed.device_mesh import DeviceMesh
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._hook = register_optimizer_step_post_hook(self._on_step)
        orig = DeviceMesh.__init__
        labeler = self._labeler

        def mesh_init(mesh_self: Any, *a: Any, **kw: Any) -> None:
            orig(mesh_self, *a, **kw)
            labeler.add_mesh(mesh_self)

        self._orig_mesh_init = orig
        DeviceMesh.__init__ = mesh_init  # type: ignore[assignment, method-assign]
        orig_wait = _C10D.Work.wait
        by_work = self._by_work
        close = self._close
        rec_of_work = self._rec_of_work
        annotate = self._annotate

        def wait(work: Any, *a: Any, **kw: Any) -> Any:
            waited = rec_of_work.pop(id(work), None) if annotate else None
            if waited is not None:
                with torch.autograd.profiler.record_function(_wait_label(waited[1])):
                    out = orig_wait(work, *a, **kw)
            else:
                out = orig_wait(work, *a, **kw)
            rec = by_work.get(id(work))
            if rec is not None:
                close(rec)
            return out

        self._orig_wait = orig_wait
        _C10D.Work.wait = wait  # type: ignore[assignment, method-assign]
        self._libs = _register_kernels(self)
        if self._watchdog_timeout_s is not None:
            self._start_monitor()
        return self

    def _start_monitor(self) -> None:
        """The monitor thread runs only when needed: works without futures, or the watchdog."""
        if self._monitor is None:
            self._monitor = threading.Thread(target=self._monitor_loop, name="distscope-commlog", daemon=True)
            self._monitor.start()

    def __exit__(self, *exc: object) -> None:
        from torch.distributed.device_mesh import DeviceMesh

        for lib in self._libs:
            lib._destroy()
        self._libs = []
        if self._orig_mesh_init is not None:
            DeviceMesh.__init__ = self._orig_mesh_init  # type: ignore[method-assign]
        if self._orig_wait is not None:
            _C10D.Work.wait = self._orig_wait  # type: ignore[method-assign]
        if self._hook is not None:
            self._hook.remove()
        # Give in-flight works a moment to report (no sync is forced on the program).
        deadline = time.perf_counter() + 1.0
        while self._open and time.perf_counter() < deadline:
            time.sleep(self._poll_interval_s)
        _Completion.drain(self)
        self._stop.set()
        self._wake.set()
        if self._monitor is not None:
            self._monitor.join(timeout=1.0)
        if self._dump_path is not None:
            save_calls(self.calls(), self._dump_path)

    # -- results ----------------------------------------------------------------------------------
    def calls(self) -> list[CommCall]:
        with self._lock:
            recs = list(self._records)
        rank = self._rank if self._rank is not None else 0
        return [
            CommCall(
                rank=rank,
                op=r.op,
                bytes=r.nbytes,
                dtype=r.dtype,
                group=r.group,
                group_ranks=r.ranks,
                dim=r.dim,
                seq=r.seq,
                step=r.step,
                start_s=r.start_s,
                duration_s=None if r.end_perf is None else r.end_perf - r.start_perf,
                error=r.error,
                api=r.api,
                peer=r.peer,
            )
            for r in recs
        ]

    # -- interception -----------------------------------------------------------------------------
    def _on_step(self, *_: Any) -> None:
        self._step += 1
        self._rec_of_work.clear()  # works never waited for by Python (e.g. DDP's) are not kept

    def _resolve_group(self, pg_obj: Any) -> tuple[str, tuple[int, ...]]:
        pg = _C10D.ProcessGroup.unbox(pg_obj) if isinstance(pg_obj, torch.ScriptObject) else pg_obj
        if isinstance(pg, str):
            pg = _C10D._resolve_process_group(pg)  # type: ignore[arg-type]
        name = pg.group_name
        if name not in self._groups:
            self._groups[name] = tuple(dist.get_process_group_ranks(pg))
        return name, self._groups[name]

    def _intercept(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], call: Callable[[], Any]
    ) -> Any:
        name = func._schema.name.split("::", 1)[1]
        functional = func.namespace == "_c10d_functional"
        if functional and name == "wait_tensor":
            t = args[0] if args else kwargs.get("tensor")
            waited = self._functional_rec(t) if self._annotate else None
            if waited is not None:
                with torch.autograd.profiler.record_function(_wait_label(waited)):
                    out = call()
            else:
                out = call()
            self._close_functional(t)
            return out
        spec = (FUNCTIONAL_OPS if functional else C10D_OPS).get(name)
        if spec is None or (not functional and getattr(self._tls, "in_functional", False)):
            return call()  # a c10d op issued by a functional op we already recorded
        names = self._arg_names.get(func)
        if names is None:
            names = self._arg_names[func] = [a.name for a in func._schema.arguments]
        bound = dict(zip(names, args, strict=False))  # trailing defaulted args may be absent
        bound.update(kwargs)
        rec = self._open_record(spec, bound, functional)
        if self._annotate:
            inner = call

            def call() -> Any:
                with torch.autograd.profiler.record_function(_comm_label(rec)):
                    return inner()

        if functional:
            self._tls.in_functional = True
            try:
                out = call()
            finally:
                self._tls.in_functional = False
        else:
            out = call()
        self._attach_completion(rec, out, functional)
        return out

    def _functional_rec(self, t: Any) -> _Open | None:
        if not isinstance(t, torch.Tensor):
            return None
        with self._lock:
            return self._by_storage.get(t.untyped_storage().data_ptr())

    def _close_functional(self, t: Any) -> None:
        if isinstance(t, torch.Tensor):
            with self._lock:
                rec = self._by_storage.pop(t.untyped_storage().data_ptr(), None)
            if rec is not None:
                self._close(rec)

    def _open_record(self, spec: CommOpSpec, bound: dict[str, Any], functional: bool) -> _Open:
        if self._rank is None:
            self._rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))
            if dist.is_initialized():
                self._labeler.set_world_size(dist.get_world_size())
        pg_arg = bound.get("group_name") if functional else bound.get("process_group")
        group, ranks = self._resolve_group(pg_arg)
        nbytes, dtype = (0, "") if spec.counted_arg is None else _tensor_bytes(bound[spec.counted_arg])
        if spec.times_group_size:
            nbytes *= int(bound["group_size"])
        seq = self._seq.get(group, 0)
        self._seq[group] = seq + 1
        rec = _Open(
            op=spec.op,
            nbytes=nbytes,
            dtype=dtype,
            group=group,
            ranks=ranks,
            seq=seq,
            step=self._step,
            start_s=time.time(),
            start_perf=time.perf_counter(),
            api="functional" if functional else "c10d",
            work=None,
            dim=self._labeler.label(group, ranks),
            peer=_peer(spec, bound, ranks),
        )
        if self._watchdog_timeout_s is not None:
            self._announce(rec)
        with self._lock:
            self._records.append(rec)
            self._open.add(rec)
        return rec

    def _attach_completion(self, rec: _Open, out: Any, functional: bool) -> None:
        if functional:  # completes in the wait_tensor() on its output (end time = when that returns)
            tensors = out if isinstance(out, (list, tuple)) else [out]
            with self._lock:
                for t in tensors:
                    if isinstance(t, torch.Tensor):
                        self._by_storage[t.untyped_storage().data_ptr()] = rec
            return
        w = out[-1] if isinstance(out, (tuple, list)) else out
        if not isinstance(w, torch.ScriptObject):  # monitored_barrier_ returns nothing: it completed
            self._close(rec)
            return
        work = _C10D.Work.unbox(w)
        if self._annotate:
            self._rec_of_work[id(work)] = (work, rec)
        try:
            fut = work.get_future()
        except RuntimeError:  # e.g. gloo send/recv: no future; polled, or closed by the program's wait()
            rec.work = work
            with self._lock:
                self._polled.append(rec)
                self._by_work[id(work)] = rec
            self._start_monitor()
            self._wake.set()
            return

        fut.add_done_callback(_Completion(self, rec))

    def _close(self, rec: _Open) -> None:
        if rec.end_perf is None:
            rec.end_perf = time.perf_counter()
        with self._lock:
            self._open.discard(rec)
            if rec.work is not None:
                self._by_work.pop(id(rec.work), None)
                if rec in self._polled:
                    self._polled.remove(rec)
                rec.work = None

    # -- monitor thread: polling works without futures, and the hang watchdog ---------------------
    def _monitor_loop(self) -> None:
        while not self._stop.is_set():
            if self._polled:
                with self._lock:
                    polled = list(self._polled)
                for rec in polled:
                    work = rec.work
                    if work is not None and work.is_completed():
                        self._close(rec)
            if self._watchdog_timeout_s is not None:
                self._check_hangs(self._watchdog_timeout_s)
            if self._polled:
                time.sleep(self._poll_interval_s)
            else:  # idle until a new polled work arrives (or the watchdog's next check)
                self._wake.wait(timeout=0.05 if self._watchdog_timeout_s is not None else 0.5)
                self._wake.clear()

    def _store(self) -> Any:
        return dist.PrefixStore("distscope_wd", dist.distributed_c10d._get_default_store())

    def _key(self, rec: _Open, rank: int) -> str:
        return f"{rec.group}/{rec.seq}/{rank}"

    def _signature(self, rec: _Open) -> str:
        return f"{rec.op.value}:{rec.nbytes}"

    def _announce(self, rec: _Open) -> None:
        self._store().set(self._key(rec, self._rank or 0), self._signature(rec))

    def _check_hangs(self, timeout_s: float) -> None:
        now = time.perf_counter()
        with self._lock:
            stale = [r for r in self._open if now - r.start_perf > timeout_s]
        if not stale:
            return
        rec = min(stale, key=lambda r: r.start_perf)
        store = self._store()
        missing, mismatched = [], []
        for r in rec.ranks:
            key = self._key(rec, r)
            if not store.check([key]):
                missing.append(r)
            elif (got := store.get(key).decode()) != self._signature(rec):
                mismatched.append(f"{r} ({got})")
        msg = (
            f"distscope: hung collective: {rec.op.value} of {rec.nbytes} bytes (seq {rec.seq}) on group "
            f"{rec.group!r} [{rec.dim}] ranks {list(rec.ranks)} did not complete within {timeout_s:g} s "
            f"on rank {self._rank}; ranks that did not arrive: {missing}"
            + (f"; ranks at a different op: {mismatched}" if mismatched else "")
        )
        print(msg, file=sys.stderr, flush=True)
        if self._dump_path is not None:
            save_calls(self.calls(), self._dump_path)
        os._exit(HANG_EXIT_CODE)
