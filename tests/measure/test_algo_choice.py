"""Per-op, per-size collective choice (measure/algo_choice.py): every candidate computes the collective, the
table picks by size, the dispatcher runs real gloo calls and trains DDP through its hook."""

from __future__ import annotations

import algo_workers
import pytest

from distscope.comm.collective import Collective
from distscope.compress.launch import run_gloo
from distscope.errors import DistscopeError
from distscope.measure.algo_choice import ChoiceTable


def test_every_candidate_computes_the_collective() -> None:
    diffs = run_gloo(algo_workers.candidates_agree, 4, timeout_s=180)
    assert len(diffs) == 2 * 9
    assert max(diffs.values()) < 1e-5, {k: v for k, v in diffs.items() if v >= 1e-5}


def test_table_switches_at_the_nearest_size_only_for_a_clear_win() -> None:
    t = ChoiceTable(world=4, seconds={"all_reduce": {1024: {"gloo": 2e-4, "ag+sum": 1e-4},
                                                     1 << 16: {"gloo": 4e-4, "ag+sum": 3.8e-4},
                                                     1 << 20: {"gloo": 1e-3, "ag+sum": 5e-3}}})
    assert t.default(Collective.ALL_REDUCE) == "gloo"  # least total over the sizes
    assert t.best(Collective.ALL_REDUCE, 900) == "ag+sum"  # 2x faster at 1 KiB: switch
    assert t.best(Collective.ALL_REDUCE, 4 << 20) == "gloo"
    assert t.best(Collective.ALL_REDUCE, 3000) == "ag+sum"  # log-nearest to 1 KiB
    assert t.best(Collective.ALL_REDUCE, 20_000) == "gloo"  # log-nearest to 64 KiB
    assert t.best(Collective.ALL_REDUCE, 1 << 16) == "gloo"  # 5% faster is within the margin: stay
    with pytest.raises(DistscopeError, match="op=all_gather: not in the choice table"):
        t.best(Collective.ALL_GATHER, 1024)


def test_dispatcher_and_ddp_hook_on_gloo() -> None:
    r = run_gloo(algo_workers.dispatch_and_ddp, 4, timeout_s=300)
    assert r["roundtrip"] and set(r["table"]["seconds"]) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert sum(r["calls"].values()) == 2
    assert r["ddp_max_diff"] < 1e-5  # DDP through the dispatcher trains like DDP's own all-reduce


@pytest.mark.parametrize(("args", "names"), [
    (["--nproc", "1"], "nproc=1 must be in 2..64"),
    (["--out", "t.csv"], "must end in .json"),
    (["--min-bytes", "100", "--max-bytes", "10"], "min_bytes=100, max_bytes=10"),
])
def test_measure_algorithms_bad_input_is_one_line(args: list[str], names: str) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "distscope", "measure", "algorithms", *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and names in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
