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


def _timed(run):  # type: ignore[no-untyped-def]
    t = time.monotonic()
    out = run()
    return time.monotonic() - t, out


# Time bounds below are the --ray-timeout plus the command's own time, measured just before on this host
# by a run that fails at the step before connecting, counted twice: once as the run's own cost, once as the
# allowance for the host's noise, which grows with its load as that time does.
def test_closed_port_fails_fast() -> None:
    port = _free_port()
    base_s = max(_timed(lambda: cli([*SMALL[:6], "--ray", "nohost"]))[0] for _ in range(3))
    elapsed_s, (code, _, err) = _timed(lambda: cli([*SMALL[:6], "--ray", f"127.0.0.1:{port}", "--ray-timeout", "2"]))
    assert code == 2 and f"--ray='127.0.0.1:{port}': no answer" in err and err.count("\n") == 1
    assert elapsed_s < 2 + 2 * base_s, (elapsed_s, base_s)


@pytest.mark.parametrize("address", ["nohost", "host:notaport", "ray://", ""])
def test_malformed_address(address: str) -> None:
    code, _, err = cli([*SMALL[:6], "--ray", address])
    assert code == 2 and "must be local, auto, HOST:PORT or ray://HOST:PORT" in err


def test_a_port_that_is_not_ray_times_out_in_bounded_time() -> None:
    """TCP answers but no Ray GCS behind it: ray.init would retry for minutes; --ray-timeout bounds it."""

    def run(port: int) -> tuple[int | None, bytes]:
        proc = spawn([*SMALL[:6], "--ray", f"127.0.0.1:{port}", "--ray-timeout", "3"])
        try:
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        return proc.returncode, err

    # the command's own time: the same run against a closed port fails at the step before ray.init (one run:
    # each is a fresh interpreter importing Ray, ~15 s on this 2-core host under load on 2026-11-25)
    base_s, _ = _timed(lambda: run(_free_port()))
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        elapsed_s, (returncode, err) = _timed(lambda: run(port))
        lines = [ln for ln in err.decode().splitlines() if ln.startswith("distscope:")]
        assert returncode == 2 and lines == [f"distscope: error: --ray='127.0.0.1:{port}': Ray did not connect "
                                             "within 3 s (--ray-timeout)"], err.decode()[-2000:]
        assert elapsed_s < 3 + 2 * base_s, (elapsed_s, base_s)
