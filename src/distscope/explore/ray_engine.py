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
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import subprocess
import sys
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
        started = self._init(ray)
        pending: list[Any] = []
        try:
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
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()
