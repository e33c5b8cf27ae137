"""CommLogger as a context manager sees every comm API, counts bytes as nccl-tests does, labels groups
from a DeviceMesh, and gets an end time for each call without synchronizing it."""

from __future__ import annotations

import subprocess
from collections import Counter

from measure_support import SCRIPTS, env, torchrun

from distscope.comm.collective import Collective as Op
from distscope.measure.calls import load_calls


def test_capture_all_apis(tmp_path):
    proc = subprocess.run(
        torchrun(str(SCRIPTS / "capture_all.py"), str(tmp_path)),
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = [c for f in sorted(tmp_path.glob("rank*.json")) for c in load_calls(f)]
    assert {c.rank for c in calls} == {0, 1, 2, 3}
    r0 = [c for c in calls if c.rank == 0]
    seen = Counter((c.op, c.bytes, c.dim, c.api) for c in r0)
    kib = 1024
    expected = {
        (Op.ALL_REDUCE, kib, "world", "c10d"),
        (Op.ALL_GATHER, 4 * kib, "world", "c10d"),  # all_gather counts the gathered output
        (Op.REDUCE_SCATTER, kib, "world", "c10d"),  # reduce_scatter counts the full input
        (Op.ALL_TO_ALL, kib, "world", "c10d"),
        (Op.BROADCAST, 32, "world", "c10d"),  # 16 bfloat16
        (Op.SEND, kib, "world", "c10d"),
        (Op.RECV, kib, "world", "c10d"),
        (Op.ALL_REDUCE, kib, "tp", "c10d"),
        (Op.ALL_REDUCE, 32, "dp", "functional"),
        (Op.ALL_GATHER, 16 * 4 * 4, "tp", "functional"),  # DTensor redistribute: the whole [16, 4] fp32
        (Op.BARRIER, 0, "world", "c10d"),
        (Op.ALL_REDUCE, 32, "cp", "c10d"),
    }
    missing = expected - set(seen)
    assert not missing, (missing, seen)
    # a functional op's record is not doubled by the c10d op it issues underneath
    assert seen[(Op.ALL_REDUCE, 32, "dp", "functional")] == 1
    assert not any(c.op is Op.ALL_REDUCE and c.bytes == 32 and c.api == "c10d" and c.dim == "dp" for c in r0)
    assert all(c.duration_s is not None for c in r0 if c.op is not Op.BARRIER), [c for c in r0 if c.duration_s is None]
    assert {c.dtype for c in r0 if c.op is Op.BROADCAST and c.bytes == 32} == {"bfloat16"}
    # per-group sequence numbers line up across ranks (they identify collective instances)
    for c in (c for c in calls if c.op is Op.ALL_GATHER and c.api == "c10d"):
        assert c.seq == r0[[x.op for x in r0].index(Op.ALL_GATHER)].seq
