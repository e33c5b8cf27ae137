"""The plan search over several processes (search/parallel.py) keeps what the serial search keeps: the same
top, pool and compression seeds (comm_pool), in the same order, ties included."""

from __future__ import annotations

import pytest

from distscope.cli import main
from distscope.dtypes import Precision
from distscope.plan import Recompute
from distscope.search import parallel
from distscope.search.planner import Added, SearchResult, search
from distscope.search.space import SearchSpace
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape

pytestmark = pytest.mark.slow


def _kept(r: SearchResult) -> tuple[list, list]:  # type: ignore[type-arg]
    return ([(c.plan, c.step_time_s, c.partition) for c in r.pool],
            [(c.plan, c.step_time_s) for c in r.comm_pool])


@pytest.mark.parametrize(("model", "cluster", "gpus", "gb", "seq", "prelude"), [
    ("llama3-8b", "dgx-h100", 64, 256, 8192, 2),  # dp = 1 layouts: DDP and the distributed optimizer tie exactly
    ("mixtral-8x7b", "dgx-h100", 64, 256, 4096, 16),
    ("llama3-8b", "dgx-h100", 8, 32, 4096, 10_000),  # the prelude holds every layout: no pool
])
def test_parallel_search_keeps_what_the_serial_one_keeps(monkeypatch: pytest.MonkeyPatch, model: str, cluster: str,
                                                         gpus: int, gb: int, seq: int, prelude: int) -> None:
    monkeypatch.setattr(parallel, "MIN_LAYOUTS", 0)  # small spaces too, so that the test stays short
    monkeypatch.setattr(parallel, "PRELUDE", prelude)  # a short prelude: blocks start from looser thresholds
    spec, shape, c = get_model(model), TrainingShape(seq_len=seq, global_batch=gb), get_cluster(cluster, gpus)
    space = SearchSpace(precision=Precision.BF16)
    serial = search(spec, shape, c, space)
    seen: list[tuple[int, int]] = []
    par = search(spec, shape, c, space, workers=2, progress=lambda i, n: seen.append((i, n)))
    assert serial.layouts == par.layouts and len(serial.pool) > 5
    assert _kept(par) == _kept(serial)
    assert par.evaluated >= serial.evaluated  # the workers skip no more than the serial loop did
    assert seen[-1] == (serial.layouts, serial.layouts) and (len(seen) > 2 or prelude >= serial.layouts)


def _rec(i: int, bound: float, key: float, comm_key: float) -> Added:
    return Added(order=(i, 0, 0, 0), bound=bound, key=key, comm_key=comm_key, sp=False, sharding=(0, True),
                 micro_batch=1, recompute=Recompute.NONE, recompute_layers=0)


def test_replay_skips_what_the_serial_loop_skipped_and_keeps_its_ties() -> None:
    """Two kept per set. Records 0-1 fill the set (threshold 5); record 2 was tried under bound 5 by a worker
    with a looser threshold: the serial loop skipped it, so its low comm-free time must not be kept. Record 3
    ties record 1's step time and comes later: not kept. Record 4 is better: it evicts the slowest."""
    r = [_rec(0, 1.0, 4.0, 3.0), _rec(1, 1.0, 5.0, 4.0), _rec(2, 5.0, 6.0, 0.5), _rec(3, 2.0, 5.0, 4.5),
         _rec(4, 3.0, 4.5, 2.0)]
    kept = parallel.Replay(2)
    kept.add([r[1], r[0]])  # a block's records arrive in any order
    kept.add([r[4], r[3], r[2]])
    assert [x.order[0] for x in kept.keeper.sorted()] == [0, 4]
    assert [x.order[0] for x in kept.comm.sorted()] == [4, 0]


def test_bad_workers_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "llama3-8b", "--gpus", "8", "--workers", "-1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--workers=-1 must be in 0..1024" in err
