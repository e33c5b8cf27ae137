"""The Ray engine: the same sweep on a local Ray instance (2 CPUs) gives the local run's output, bit
for bit; addresses that do not answer fail in bounded time with one line."""

from __future__ import annotations

import socket
import time

import pytest

from tests.explore.explore_support import SMALL, cli, spawn

ray = pytest.importorskip("ray")


def test_ray_output_equals_local_bit_for_bit(tmp_path) -> None:
    local_json, ray_json = tmp_path / "local.json", tmp_path / "ray.json"
    code, _, err = cli([*SMALL, "--workers", "2", "--out", str(local_json)])
    assert code == 0, err
    code, _, err = cli([*SMALL, "--ray", "local", "--ray-cpus", "2", "--out", str(ray_json)])
    assert code == 0, err
    assert "(0 already done, 6 planned)" in err
    assert not ray.is_initialized(), "a Ray instance started by explore is shut down at the end"
    assert ray_json.read_bytes() == local_json.read_bytes()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_closed_port_fails_fast() -> None:
    port = _free_port()
    t = time.monotonic()
    code, _, err = cli([*SMALL[:6], "--ray", f"127.0.0.1:{port}", "--ray-timeout", "2"])
    assert code == 2 and f"--ray='127.0.0.1:{port}': no answer" in err and err.count("\n") == 1
    assert time.monotonic() - t < 10


@pytest.mark.parametrize("address", ["nohost", "host:notaport", "ray://", ""])
def test_malformed_address(address: str) -> None:
    code, _, err = cli([*SMALL[:6], "--ray", address])
    assert code == 2 and "must be local, auto, HOST:PORT or ray://HOST:PORT" in err


def test_a_port_that_is_not_ray_times_out_in_bounded_time() -> None:
    """TCP answers but no Ray GCS behind it: ray.init would retry for minutes; --ray-timeout bounds it."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        t = time.monotonic()
        proc = spawn([*SMALL[:6], "--ray", f"127.0.0.1:{port}", "--ray-timeout", "3"])
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        lines = [ln for ln in err.decode().splitlines() if ln.startswith("distscope:")]
        assert proc.returncode == 2 and lines == [f"distscope: error: --ray='127.0.0.1:{port}': Ray did not connect "
                                                  "within 3 s (--ray-timeout)"], err.decode()[-2000:]
        assert time.monotonic() - t < 45
