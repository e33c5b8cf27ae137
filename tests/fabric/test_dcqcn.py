"""DCQCN at flow level (fabric/dcqcn.py): the fluid model's reaction to incast, against the max-min ideal.

What must hold whatever the parameters: a lone flow runs at line rate; no schedule beats the congestion
bound (the busiest link's bytes over its capacity); long incasts converge to a fair share with the queue
held at PFC's X_off; short ones pay DCQCN's start-up transient; and traffic that never shares a queue (a
rail-aligned ring all-reduce: "topology-aware collectives avoid incast", the RoCE-CC-for-training study
in the seeds) is untouched by congestion control.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.fabric.build import fabric_for_cluster
from distscope.fabric.collective import pattern, siblings, step_verdict
from distscope.fabric.dcqcn import CongestionControl, DcqcnParams, congestion_controls, dcqcn_transfer
from distscope.fabric.flows import transfer
from distscope.fabric.routing import Router, Routing
from distscope.system.presets import get_cluster

C = 50e9  # B/s, a 400 Gb/s port


def _incast(n: int, size: float, cap_Bps: float = C) -> tuple[np.ndarray, ...]:
    """n senders, each on its own NIC link (0..n-1), into one switch port (link n), all links at cap_Bps."""
    links = np.array(list(range(n)) + [n] * n)
    flows = np.array(list(range(n)) * 2)
    nic = np.array([True] * n + [False])
    return links, flows, np.ones(2 * n), np.full(n, size), np.full(n + 1, cap_Bps), nic


def test_a_lone_flow_runs_at_line_rate() -> None:
    links, flows, fr, sizes, cap, nic = _incast(1, 64e6)
    r = dcqcn_transfer(links, flows, fr, sizes, cap, nic)
    assert r.flows.makespan_s == pytest.approx(64e6 / C, rel=1e-3)
    assert r.marked_fraction == 0 and r.max_queue_bytes.max() == 0


@pytest.mark.parametrize("n", [2, 8, 32])
def test_long_incast_converges_to_a_fair_share_with_a_bounded_queue(n: int) -> None:
    links, flows, fr, sizes, cap, nic = _incast(n, 128e6)
    r = dcqcn_transfer(links, flows, fr, sizes, cap, nic)
    ideal = n * 128e6 / C
    # DCQCN leaves the link partly idle after its cuts (ns-3 shows 12-31% on 10 MB incasts; the longer the
    # flows, the less it weighs), never faster than the link
    assert 0.999 * ideal <= r.flows.makespan_s <= 1.20 * ideal
    assert r.flows.finish_s.max() / r.flows.finish_s.min() < 1.02  # fair: all end together
    xoff = DcqcnParams().xoff_bytes * C / DcqcnParams().ref_Bps
    assert r.max_queue_bytes.max() <= 1.1 * xoff  # PFC holds the queue at X_off


def test_short_incast_pays_the_start_up_transient() -> None:
    links, flows, fr, sizes, cap, nic = _incast(32, 1e6)
    r = dcqcn_transfer(links, flows, fr, sizes, cap, nic)
    ideal = transfer(links, flows, fr, sizes, cap).makespan_s
    assert r.flows.makespan_s > 1.05 * ideal  # every sender starts at line rate: queue, marks, cuts
    assert r.marked_fraction > 0.1 and r.max_queue_bytes.max() > DcqcnParams().kmax_bytes * C / DcqcnParams().ref_Bps


def test_pfc_holds_the_queue_at_xoff() -> None:
    """With the paper's thresholds (X_off 400 KB at 40 Gb/s) a 32-to-1 incast reaches X_off: PFC pauses."""
    links, flows, fr, sizes, cap, nic = _incast(32, 1e6)
    prm = DcqcnParams.paper()
    r = dcqcn_transfer(links, flows, fr, sizes, cap, nic, prm)
    xoff = prm.xoff_bytes * C / prm.ref_Bps
    assert r.pause_s.max() > 0 and r.max_queue_bytes.max() <= 1.1 * xoff


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 12), size=st.floats(1e5, 2e7), extra=st.integers(0, 3))
def test_never_beats_the_congestion_bound(n: int, size: float, extra: int) -> None:
    """n senders into one port plus `extra` flows that also cross a second, shared port."""
    links, flows, fr, sizes, cap, nic = _incast(n, size)
    if extra:
        k = np.arange(n, n + extra)
        links = np.concatenate([links, n + 1 + np.arange(extra), np.full(extra, n + 1 + extra)])
        flows = np.concatenate([flows, k, k])
        fr = np.ones(len(links))
        sizes = np.concatenate([sizes, np.full(extra, size)])
        cap = np.full(n + 2 + extra, C)
        nic = np.concatenate([nic, np.ones(extra, bool), [False]])
    r = dcqcn_transfer(links, flows, fr, sizes, cap, nic)
    bound = transfer(links, flows, fr, sizes, cap, fct=False).makespan_s
    assert r.flows.makespan_s >= 0.99 * bound
    assert np.all(np.isfinite(r.flows.finish_s))


def test_rail_aligned_ring_is_untouched_by_congestion_control() -> None:
    c = get_cluster("dgx-h100", 256)
    f = fabric_for_cluster(c)
    pairs = pattern(f, siblings(tuple(range(0, 256, 8)), 256), Collective.ALL_REDUCE)
    router = Router(f)
    none = step_verdict(f, router, pairs, Routing.ECMP, flow_bytes=8e6)
    dcqcn = step_verdict(f, router, pairs, Routing.ECMP, cc=CongestionControl.DCQCN, flow_bytes=8e6)
    assert none.factor == dcqcn.factor == 1.0 and dcqcn.max_queue_bytes == 0


def test_ecmp_collisions_cost_more_under_dcqcn_than_in_the_ideal() -> None:
    """An EP-64 all-to-all crossing the spines under ECMP: the collisions' shared queues get marked, so
    DCQCN's share is below the max-min one."""
    c = get_cluster("dgx-h100", 256)
    f = fabric_for_cluster(c)
    pairs = pattern(f, siblings(tuple(range(64)), 256), Collective.ALL_TO_ALL)
    router = Router(f)
    none = step_verdict(f, router, pairs, Routing.ECMP, flow_bytes=2e6)
    dcqcn = step_verdict(f, router, pairs, Routing.ECMP, cc=CongestionControl.DCQCN, flow_bytes=2e6)
    assert none.factor < 1.0
    assert dcqcn.factor < none.factor and dcqcn.max_queue_bytes > 0


def test_bad_cc_is_one_line() -> None:
    with pytest.raises(DistscopeError, match="--cc 'dcqn' is not a congestion control; closest: dcqcn"):
        congestion_controls("none,dcqn")
    with pytest.raises(DistscopeError, match="kmin"):
        DcqcnParams(kmin_bytes=2e6)


def test_incast_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "distscope", "fabric", "incast", "--senders", "8:24", "--to", "0",
                           "--bytes", "2e6", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    none, dcqcn = out["results"]
    assert out["senders"] == 16 and none["cc"] == "none" and dcqcn["cc"] == "dcqcn"
    assert none["slowdown"] == pytest.approx(1.0) and dcqcn["slowdown"] > 1.0
    assert dcqcn["hot"][0][0] == "leaf0.0->gpu0"
    bad = subprocess.run([sys.executable, "-m", "distscope", "fabric", "incast", "--senders", "0:4", "--to", "2"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "--to 2" in bad.stderr
