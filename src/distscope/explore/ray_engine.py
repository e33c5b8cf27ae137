"""Run a sweep on Ray (the optional extra `distscope[ray]`): each task is a batch of points, results
stream back as tasks finish (`ray.wait`), Ray does all the scheduling.

Addresses: `local` starts a Ray instance on this machine (`--ray-cpus` CPUs, default all; what the
tests use, on 2 cores); `auto` joins the instance already running here (`ray start --head`);
`HOST:PORT` joins a cluster's head node (GCS port, 6379 by default); `ray://HOST:PORT` goes through
Ray Client (port 10001). A remote address is first probed over TCP, and `ray.init` itself must return
within the connect timeout: an address that does not answer is a one-line error, never a hang. On a
remote cluster the driver's own `distscope` package is shipped to the workers (runtime_env
py_modules), so they run the same code as the driver whatever they have installed (they need numpy,
typer, rich and PyYAML). A Ray instance started here is shut down at the end; one we joined is not.

"At the end" includes an interrupt (Ctrl-C) or an error at any moment: outstanding tasks are cancelled,
`ray.shutdown()` runs with further Ctrl-Cs deferred, and any process this run's Ray instance left behind
is terminated. A Ctrl-C inside `ray.init` for `local` is deferred until the instance is up (a second one
stops at once): interrupted half-way, ray.init leaves a node that Ray's own shutdown cannot stop (the
raylet's DashboardAgent and RuntimeEnvAgent then wait ~60 s for a GCS that is gone) and that
`ray.shutdown()` may crash the driver on. The safety net: the processes this driver spawned (Linux
/proc, matched by pid and start time, minus those it had before) are terminated, then killed after a
grace period.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.explore.batches import make_batches
from distscope.explore.point import PlanSettings, Point, run_batch

LOCAL, AUTO = "local", "auto"


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise DistscopeError("--ray needs Ray: pip install 'distscope[ray]'") from None
    return ray


def _host_port(address: str) -> tuple[str, int]:
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistscopeError(f"--ray={address!r} must be local, auto, HOST:PORT or ray://HOST:PORT")
    return host.strip("[]"), int(port)


def probe(address: str, timeout_s: float) -> None:
    """A TCP connection to the address within the timeout, or a one-line error."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise DistscopeError(f"--ray={address!r}: no answer from {host}:{port} within {timeout_s:g} s ({why})") from None


_PROBE = """
import logging, sys
import ray
ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
ray.shutdown()
"""


def connect_probe(address: str, timeout_s: float) -> None:
    """`ray.init(address)` in a child process that must succeed within the timeout (it is killed
    otherwise): an address where something answers but no Ray does makes ray.init retry for minutes."""
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, address], capture_output=True, timeout=timeout_s, text=True)
    except subprocess.TimeoutExpired:
        raise DistscopeError(f"--ray={address!r}: Ray did not connect within {timeout_s:g} s (--ray-timeout)") from None
    if r.returncode != 0:
        last = next((ln for ln in reversed(r.stderr.strip().splitlines()) if ln.strip()), "unknown error")
        raise DistscopeError(f"--ray={address!r}: cannot connect: {' '.join(last.split())[:300]}")


Proc = tuple[int, int]  # (pid, start time in clock ticks since boot): a pid that cannot have been reused


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """{pid: (ppid, start time, state)} from /proc; {} where there is none (not Linux)."""
    out: dict[int, tuple[int, int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ... starttime: comm may hold spaces and parentheses, so split after its last ')'
        rest = stat[stat.rfind(b")") + 2 :].split()
        out[int(name)] = (int(rest[1]), int(rest[19]), rest[0].decode())
    return out


def descendants() -> set[Proc]:
    """This process's live descendants (children, theirs, ...), zombies excluded."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: set[Proc] = set()
    stack = list(children.get(os.getpid(), ()))
    while stack:
        pid = stack.pop()
        ppid, start, state = table[pid]
        if state != "Z":
            out.add((pid, start))
        stack.extend(children.get(pid, ()))
    return out


def _alive(procs: set[Proc]) -> set[Proc]:
    table = _proc_table()
    return {(pid, start) for pid, start in procs if pid in table and table[pid][1] == start and table[pid][2] != "Z"}


def terminate(procs: set[Proc], grace_s: float = 2.0) -> None:
    """SIGTERM the processes still alive (same pid and start time), then SIGKILL those alive after `grace_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in _alive(procs):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while (procs := _alive(procs)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not procs:
            return


@contextlib.contextmanager
def deferred_sigint(*, note: str = "", escape: bool = False) -> Iterator[list[int]]:
    """Ctrl-C recorded, not raised, inside the block; the list it yields holds the signals received.
    `note` is printed on stderr at the first; with `escape`, a second raises KeyboardInterrupt. Only the
    main thread can set handlers: elsewhere, a no-op."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def handler(signum: int, frame: object) -> None:
        got.append(signum)
        if escape and len(got) > 1:
            raise KeyboardInterrupt
        if note and len(got) == 1:
            print(note, file=sys.stderr, flush=True)

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, old)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RayEngine:
    address: str = LOCAL
    cpus: int = 0  # for `local`: 0 = every core
    connect_timeout_s: float = 30.0
    stall_timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        a = self.address.strip()
        if not a:
            raise DistscopeError("--ray='' must be local, auto, HOST:PORT or ray://HOST:PORT")
        if a not in (LOCAL, AUTO):
            _host_port(a)
        if not 0 <= self.cpus <= 4096:
            raise DistscopeError(f"--ray-cpus={self.cpus} must be in 0..4096 (0 = every core)")
        if not self.connect_timeout_s > 0:
            raise DistscopeError(f"--ray-timeout={self.connect_timeout_s} must be > 0")

    @property
    def name(self) -> str:
        return f"ray ({self.address})"

    def _init(self, ray: Any) -> bool:
        """Connect (or start); True when this call started the instance (and must shut it down).
        `ray.init` runs in this (the main) thread: Ray's core worker cannot be shut down cleanly when
        it was started from another thread, so a remote address is first tried by a child process under
        the connect timeout (`connect_probe`)."""
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
        pkg = str(Path(__file__).resolve().parents[1])  # .../distscope
        if self.address == LOCAL:
            # workers are started from this process's environment: make them import this distscope
            src = str(Path(pkg).parent)
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
            kwargs["num_cpus"] = self.cpus or None
        else:
            if self.address != AUTO:
                probe(self.address, self.connect_timeout_s)
                kwargs["runtime_env"] = {"py_modules": [pkg]}
            connect_probe(self.address, self.connect_timeout_s)
            kwargs["address"] = self.address
        try:
            ray.init(**kwargs)
        except Exception as exc:
            msg = " ".join(str(exc).split())[:300]
            raise DistscopeError(f"--ray={self.address!r}: cannot connect: {type(exc).__name__}: {msg}") from None
        return self.address == LOCAL

    def run(self, todo: list[tuple[str, Point]], settings: PlanSettings) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        if not todo:
            return
        ray = _ray()
        # an instance this run starts is this run's to stop, even when ray.init itself is interrupted
        owned = self.address == LOCAL and not ray.is_initialized()
        before = descendants() if owned else set()
        pending: list[Any] = []
        ok = False
        try:
            if owned:
                with deferred_sigint(note="distscope: stopping once Ray has started (Ctrl-C again: at once)",
                                     escape=True) as interrupted:
                    self._init(ray)
                if interrupted:
                    raise KeyboardInterrupt
            else:
                self._init(ray)
            cpus = int(ray.cluster_resources().get("CPU", 1))
            task = ray.remote(num_cpus=1, max_retries=1)(run_batch)
            settings_ref = ray.put(settings)
            pending = [task.remote(b, settings_ref) for b in make_batches(todo, cpus)]
            last = time.monotonic()
            while pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
                if done:
                    last = time.monotonic()
                elif time.monotonic() - last > self.stall_timeout_s:
                    raise DistscopeError(f"no Ray task finished within {self.stall_timeout_s:.0f} s; stopped "
                                         "(finished points are kept: run again to resume)")
                for ref in done:
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        msg = " ".join(str(exc).split())[:300]
                        raise DistscopeError(f"a Ray task failed ({type(exc).__name__}: {msg}); finished points "
                                             "are kept: run again to resume") from None
            ok = True
        finally:
            with deferred_sigint() as interrupted:
                self._stop(ray, pending, owned=owned, before=before)
            if ok and interrupted:
                raise KeyboardInterrupt

    @staticmethod
    def _stop(ray: Any, pending: list[Any], *, owned: bool, before: set[Proc]) -> None:
        """Cancel the outstanding tasks; for an instance this run started, shut it down and terminate
        what it leaves (see the module docstring)."""
        if ray.is_initialized():
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
        if not owned:
            return
        left = descendants() - before  # before shutdown: the raylet's agents are still its children
        if ray.is_initialized():  # not after a half-done ray.init: its shutdown can crash the driver
            with contextlib.suppress(Exception):
                ray.shutdown()
        terminate(left)
