"""Torch-free parts of measure: busbw factors, result files, nccl-tests parsing, calibration, profiles,
straggler analysis, group labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.measure.calibrate import calibrate, fit_alpha_beta
from distscope.measure.calls import CommCall
from distscope.measure.groups import GroupLabeler, parse_dim_map
from distscope.measure.nccl_tests import parse_nccl_tests
from distscope.measure.profile import alpha_beta, load_profile, save_profile
from distscope.measure.result import CollectiveResult, load_results, save_results
from distscope.measure.straggler import find_stragglers
from distscope.measure.summary import bytes_per_op_dim, summarize

DATA = Path(__file__).parent / "data"


def test_busbw_factors_follow_nccl_tests():
    assert Collective.ALL_REDUCE.busbw_factor(8) == pytest.approx(14 / 8)
    for op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        assert op.busbw_factor(4) == pytest.approx(0.75)
    for op in (Collective.BROADCAST, Collective.SEND_RECV, Collective.REDUCE):
        assert op.busbw_factor(4) == 1.0
    # ops the model does not price keep factor 1, as measure reported them before the enums were merged
    for op in (Collective.SEND, Collective.RECV, Collective.GATHER, Collective.SCATTER, Collective.BARRIER):
        assert op.busbw_factor(4) == 1.0
    alg, bus = Collective.ALL_REDUCE.bandwidths_GBps(10**9, 0.5, 4)
    assert (alg, bus) == pytest.approx((2.0, 3.0))
    with pytest.raises(DistscopeError, match="nranks=0"):
        Collective.ALL_REDUCE.busbw_factor(0)


def test_op_parse_accepts_aliases_and_rejects_typos():
    assert Collective.parse("all_reduce_perf") is Collective.ALL_REDUCE
    assert Collective.parse("reduce_scatter_tensor") is Collective.REDUCE_SCATTER
    with pytest.raises(DistscopeError, match=r"allreduc.*closest: all_reduce"):
        Collective.parse("allreduc")


def _result(op=Collective.ALL_REDUCE, size=1024, t=1e-3, **kw):
    return CollectiveResult(
        op=op,
        bytes=size,
        dtype="float32",
        nranks=4,
        time_s=t,
        time_min_s=t * 0.9,
        time_max_s=t * 1.5,
        iters=10,
        **kw,
    )


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_results_round_trip(tmp_path, suffix):
    rs = [_result(), _result(Collective.ALL_GATHER, 4096, 2e-3, in_place=True, level="node")]
    save_results(rs, tmp_path / f"r{suffix}")
    assert load_results(tmp_path / f"r{suffix}") == rs
    if suffix == ".json":
        row = json.loads((tmp_path / "r.json").read_text())["results"][0]
        assert {"op", "bytes", "dtype", "nranks", "time_s", "algbw_GBps", "busbw_GBps"} <= row.keys()
        assert row["busbw_GBps"] == pytest.approx(1024 / 1e-3 / 1e9 * 1.5)


def test_result_rejects_inconsistent_times():
    with pytest.raises(DistscopeError, match="min <= median <= max"):
        CollectiveResult(
            op=Collective.ALL_REDUCE,
            bytes=8,
            dtype="float32",
            nranks=2,
            time_s=1.0,
            time_min_s=2.0,
            time_max_s=3.0,
            iters=1,
        )


def test_nccl_tests_parser_reads_both_column_groups():
    rs = parse_nccl_tests((DATA / "all_reduce_perf_8xH100.txt").read_text(), device="H100")
    oop = [r for r in rs if not r.in_place]
    ip = [r for r in rs if r.in_place]
    assert len(oop) == len(ip) == 10
    assert {r.op for r in rs} == {Collective.ALL_REDUCE} and {r.nranks for r in rs} == {8}
    assert {r.dtype for r in rs} == {"float32"} and {r.iters for r in rs} == {20}
    big = oop[-1]
    assert big.bytes == 1073741824 and big.time_s == pytest.approx(5244.18e-6)
    assert big.busbw_GBps == pytest.approx(358.31, abs=0.01)
    assert ip[-1].time_s == pytest.approx(5265.46e-6)


def test_nccl_tests_parser_infers_nranks_from_busbw_and_checks_op():
    text = "\n".join(ln for ln in (DATA / "all_reduce_perf_8xH100.txt").read_text().splitlines() if "Rank" not in ln)
    assert {r.nranks for r in parse_nccl_tests(text)} == {8}
    with pytest.raises(DistscopeError, match="does not match op=all_gather"):
        parse_nccl_tests(text, op=Collective.ALL_GATHER, nranks=8)
    with pytest.raises(DistscopeError, match="no result rows"):
        parse_nccl_tests("# all_reduce_perf\n# nothing\n")


def test_fit_recovers_exact_alpha_beta_and_relative_weighting():
    sizes = np.logspace(3, 9, 13)
    times = 20e-6 + sizes / 150e9
    fit = fit_alpha_beta(sizes, times)
    assert fit.alpha_s == pytest.approx(20e-6, rel=1e-9)
    assert fit.beta_s_per_byte == pytest.approx(1 / 150e9, rel=1e-9)
    # relative weighting: a 10% outlier on the largest point barely moves alpha
    times2 = times.copy()
    times2[-1] *= 1.1
    assert fit_alpha_beta(sizes, times2).alpha_s == pytest.approx(20e-6, rel=0.05)
    # latency-bound data cannot give a negative beta
    assert fit_alpha_beta([8, 16, 32], [1e-5, 0.9e-5, 0.95e-5]).beta_s_per_byte == 0.0


def test_calibrate_nccl_tests_into_profile_and_back(tmp_path):
    rs = parse_nccl_tests((DATA / "all_reduce_perf_8xH100.txt").read_text(), level="nvlink")
    prof = calibrate(rs, name="dgx-h100", device="H100", source="sample")
    fit = prof.levels["nvlink"][Collective.ALL_REDUCE]
    assert fit.n_points == 10 and fit.nranks == 8
    assert fit.alpha_s == pytest.approx(24.6e-6, rel=0.05)
    assert fit.busbw_GBps(Collective.ALL_REDUCE) == pytest.approx(360, rel=0.05)
    assert 0 < fit.max_rel_err < 0.35  # the sample's <1 MB rows are 30% slower than the line
    save_profile(prof, tmp_path / "p.json")
    back = load_profile(tmp_path / "p.json")
    assert back == prof
    ab = alpha_beta(back, "nvlink")
    assert ab[Collective.ALL_REDUCE] == (fit.alpha_s, fit.beta_s_per_byte)
    with pytest.raises(DistscopeError, match=r"level='nvlnk'.*closest: nvlink"):
        alpha_beta(back, "nvlnk")
    (tmp_path / "bad.json").write_text('{"schema": "other"}')
    with pytest.raises(DistscopeError, match="schema='other'"):
        load_profile(tmp_path / "bad.json")


def _call(rank, seq, start, op=Collective.ALL_REDUCE, step=0, dim="dp", size=64):
    return CommCall(
        rank=rank,
        op=op,
        bytes=size,
        dtype="float32",
        group="0",
        group_ranks=(0, 1, 2, 3),
        dim=dim,
        seq=seq,
        step=step,
        start_s=start,
        duration_s=1e-4,
    )


def test_straggler_analysis_names_the_late_rank_and_only_it():
    rng = np.random.default_rng(0)
    calls = [
        _call(r, s, 100.0 + s + rng.uniform(0, 1e-3) + (0.02 if r == 1 else 0)) for s in range(20) for r in range(4)
    ]
    rep = find_stragglers(calls)
    assert rep.stragglers == [1]
    assert next(r for r in rep.ranks if r.rank == 1).last_fraction == 1.0
    healthy = [_call(r, s, 100.0 + s + rng.uniform(0, 1e-3)) for s in range(20) for r in range(4)]
    assert find_stragglers(healthy).stragglers == []


def test_summary_and_per_step_bytes():
    calls = [
        _call(0, 0, 1.0, step=0, size=100),
        _call(0, 1, 2.0, step=1, size=100),
        _call(0, 2, 2.5, op=Collective.SEND, step=1, dim="pp", size=7),
        _call(1, 0, 1.0, size=100),
    ]
    assert bytes_per_op_dim(calls, rank=0, step=1) == {
        (Collective.ALL_REDUCE, "dp"): 100,
        (Collective.SEND, "pp"): 7,
    }
    rows, per_dim = summarize(calls)
    assert per_dim == {"dp": 300, "pp": 7}
    assert [(r.op, r.calls, r.ranks) for r in rows if r.dim == "dp"] == [(Collective.ALL_REDUCE, 3, 2)]


def test_dim_map_and_labeler():
    dims = parse_dim_map("tp=0,1|2,3; dp=0,2|1,3")
    assert dims == {"tp": [[0, 1], [2, 3]], "dp": [[0, 2], [1, 3]]}
    lab = GroupLabeler(dims=dims, world_size=4)
    assert lab.label("3", (1, 3)) == "dp"
    assert lab.label("0", (0, 1, 2, 3)) == "world"
    assert lab.label("9", (0, 3)) == "group[0,3]"
    with pytest.raises(DistscopeError, match="must be integers"):
        parse_dim_map("tp=a,b")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["collectives", "--ops", "allreduc"], "ops='allreduc' is not a collective; closest: all_reduce"),
        (["collectives", "--out", "x.txt"], "out='x.txt' must end in .json or .csv"),
        (["collectives", "--dtypes", "flaot32"], "dtype='flaot32' is not a torch dtype; closest: float32"),
        (["calibrate", "missing.json", "--out", "p.json"], "does not exist"),
        (["log", "--out", "x.json"], "command is empty"),
    ],
)
def test_cli_bad_input_is_one_line(args, message, tmp_path):
    import subprocess
    import sys

    from measure_support import env

    proc = subprocess.run(
        [sys.executable, "-m", "distscope", "measure", *args],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distscope: error: ") and message in lines[0], proc.stderr
