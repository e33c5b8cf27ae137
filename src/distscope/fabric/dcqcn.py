"""DCQCN at flow level: RoCE congestion control on fluid queues, against the max-min ideal.

DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM'15) has three parts.
Switches mark packets with ECN by RED on the egress queue: probability 0 below Kmin, rising to Pmax at
Kmax, 1 above. The receiver returns marks to the sender as CNPs. The sender (reaction point) runs a state
machine on its timers:
- every τ' it raises α toward 1 by g where a CNP came in the interval, else decays it by 1 - g;
- every τ, if a CNP came, it cuts R_C by α/2, sets the target R_T = R_C, and restarts its increase timer
  and byte counter;
- on every timer (T) or byte-counter (B) event it moves R_C halfway to R_T. It does so for F events (fast
  recovery), then also raises R_T by R_AI (additive increase), and past that by R_HAI (hyper increase).

NVIDIA's NICs, and the HPCC ns-3 code that ASTRA-sim's ns-3 backend uses, differ from the paper:
- no byte counter (B = inf);
- τ is the sender's rate-decrease interval (4 µs), and every marked packet is answered by a CNP;
- R_T moves only at the first cut after an increase (clamp_target False);
- the increase timer T is 300 µs.

Here each flow runs that state machine exactly, vectorized over flows. The marks it receives are the
expected count of its marked packets: x·dt/MTU·p, with p its marking probability one feedback delay ago.
A CNP arrives each time that count passes a whole packet, so runs are deterministic, without seeds.

A flow's marking probability over its route is 1 - Π_l (1-p_l)^f_l, where f_l is its share of the flow
(below 1 where the flow is sprayed).

Queues are fluid: dq_l/dt = Σ_f f_l·x_f - C_l on the switch egress ports. A GPU's NIC shares its port
among its own flows without a queue. PFC is modelled as a hold: a queue at X_off admits only what it
drains, pausing its flows in proportion. The pause does not spread to flows that do not cross the
queue, so head-of-line blocking is not modelled. A flow ends when its last byte is sent, plus the
queueing delay on its route at that moment.

An earlier version integrated the fluid model of Zhu et al., CoNEXT'16 (expected rates) instead. Against
ns-3 it missed the synchronized cut cascades that leave a link idle until the next timer event: 2.5x in
ns-3 at 2 x 1 MB against 1.06x. The state machine gives 1.72x; see the test for the full comparison.

The defaults are the HPCC ns-3 code's DCQCN values at 100 Gb/s:
- ECN thresholds: Kmin 400 KB, Kmax 1600 KB, Pmax 0.2;
- α: g 1/256, τ' 1 µs;
- cuts: τ 4 µs;
- increase: T 300 µs, F 1, R_AI 20 Mb/s, R_HAI 200 Mb/s, minimum rate 1 Gb/s.

Kmin, Kmax, X_off and the increase steps scale with the link rate from 100 Gb/s, as that code's KMIN/KMAX
maps do from 25 to 100 Gb/s. `DcqcnParams.paper()` gives the SIGCOMM'15 values, for 40 Gb/s:
- ECN thresholds: Kmin 5 KB, Kmax 200 KB, Pmax 1%;
- α: g 1/256, τ' 55 µs;
- cuts: τ 50 µs;
- increase: T 55 µs, B 10 MB, R_AI 40 Mb/s, R_HAI 200 Mb/s, F 5.

Checked against ns-3 packet-level runs of N-to-1 incast (data/reference/ns3_dcqcn;
tests/fabric/test_dcqcn_ns3.py). X_off (32 MB at 100 Gb/s, the ns-3 runs' buffer) and the 1 KB packet
are this model's choices.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math

import numpy as np
from scipy.sparse import csc_matrix, csr_matrix

from distscope.enums import parse_list
from distscope.errors import DistscopeError
from distscope.fabric.flows import FlowResult

REF_Bps = 100e9 / 8  # the link rate the default parameters are given for
MAX_STEPS = 200_000
DT_MIN = 0.02e-6


class CongestionControl(enum.Enum):
    """`none`: the max-min fair rates a perfect scheme converges to at once (flows.transfer);
    `dcqcn`: DCQCN's reaction point per flow on fluid queues (this module)."""

    NONE = "none"
    DCQCN = "dcqcn"


def congestion_controls(text: str) -> list[CongestionControl]:
    """--cc's comma list of congestion controls."""
    return parse_list(CongestionControl, text, "--cc", "congestion control")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DcqcnParams:
    """DCQCN's knobs at the reference rate `ref_Bps` (module docstring): thresholds and increase steps
    scale with each link's rate by link / ref_Bps (ref_Bps = 0: taken as given, at every rate)."""

    kmin_bytes: float = 400e3
    kmax_bytes: float = 1600e3
    pmax: float = 0.2
    g: float = 1 / 256
    cnp_interval_s: float = 4e-6  # τ: at most one cut per τ
    alpha_timer_s: float = 1e-6  # τ'
    rate_timer_s: float = 300e-6  # T
    byte_counter_bytes: float = math.inf  # B (inf: no byte counter, the timer alone raises the rate)
    ai_Bps: float = 20e6 / 8
    hai_Bps: float = 200e6 / 8
    fast_recovery: int = 1  # F
    xoff_bytes: float = 32e6
    mtu_bytes: float = 1000.0
    feedback_s: float = 4e-6  # mark -> CNP -> sender: about one fabric RTT
    min_rate_fraction: float = 0.01
    clamp_target: bool = False  # True: every cut sets R_T = R_C (the paper); False: only the first after an increase
    ref_Bps: float = REF_Bps

    @classmethod
    def paper(cls) -> DcqcnParams:
        """The SIGCOMM'15 paper's parameters (sec. 5), for 40 Gb/s links."""
        return cls(kmin_bytes=5e3, kmax_bytes=200e3, pmax=0.01, cnp_interval_s=50e-6, alpha_timer_s=55e-6,
                   rate_timer_s=55e-6, byte_counter_bytes=10e6, ai_Bps=40e6 / 8, hai_Bps=200e6 / 8, fast_recovery=5,
                   xoff_bytes=400e3, min_rate_fraction=1e-3, clamp_target=True, ref_Bps=40e9 / 8)

    def __post_init__(self) -> None:
        if not 0 <= self.kmin_bytes < self.kmax_bytes:
            raise DistscopeError(f"dcqcn: kmin={self.kmin_bytes:g} B, kmax={self.kmax_bytes:g} B: need 0 <= kmin < kmax")
        if not 0 < self.pmax <= 1 or not 0 < self.g <= 1:
            raise DistscopeError(f"dcqcn: pmax={self.pmax:g}, g={self.g:g}: need both in (0, 1]")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CcResult:
    """A DCQCN run: the flows' result, and what the queues did."""

    flows: FlowResult
    max_queue_bytes: np.ndarray  # per link
    pause_s: np.ndarray  # per link: time its queue sat at X_off (PFC pausing its senders)
    marked_fraction: float  # bytes sent while marked, over bytes sent


def red(q: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, pmax: float) -> np.ndarray:
    """RED/ECN marking probability of each queue (DCQCN's CP algorithm)."""
    ramp = pmax * (q - kmin) / (kmax - kmin)
    return np.where(q <= kmin, 0.0, np.where(q <= kmax, ramp, 1.0))


def _flow_min(values: np.ndarray, at: csr_matrix, has_route: np.ndarray) -> np.ndarray:
    """Per flow, the minimum of `values` over the links of its route (1 for a flow without one)."""
    out = np.ones(at.shape[0])
    vals = values[at.indices]
    starts = at.indptr[:-1][has_route]
    out[has_route] = np.minimum.reduceat(vals, starts)
    return out


def dcqcn_transfer(links: np.ndarray, flows: np.ndarray, fracs: np.ndarray, sizes_bytes: np.ndarray,
                   cap_Bps: np.ndarray, nic_link: np.ndarray, params: DcqcnParams | None = None) -> CcResult:
    """Run flows of `sizes_bytes`, all starting at 0 at line rate, under DCQCN to completion.

    Routes are COO triplets (links, flows, fracs) as for flows.transfer; `nic_link[l]` marks the links
    that leave a GPU (its NIC port: shared among its flows, no switch queue)."""
    prm = params or DcqcnParams()
    n_links, n_flows = len(cap_Bps), len(sizes_bytes)
    a = csr_matrix((fracs, (links, flows)), shape=(n_links, n_flows))
    at = csr_matrix(csc_matrix(a).T)
    at.sort_indices()
    has_route = np.diff(at.indptr) > 0
    sizes = sizes_bytes.astype(float)
    link_bytes = np.asarray(a @ sizes).ravel()
    cap = cap_Bps.astype(float)
    bound = float((link_bytes / cap).max(initial=0.0))
    dt_max = prm.cnp_interval_s / 2  # cut checks resolved; α's faster ticks are applied k at a time
    dt_cap = max(DT_MIN, min(dt_max, bound / 500))  # short transfers still take a few hundred steps
    if bound / dt_max > MAX_STEPS / 2:
        raise DistscopeError(f"dcqcn: {bound * 1e3:.3g} ms of traffic is over {MAX_STEPS:,} steps of "
                             f"{dt_max * 1e6:.3g} µs: use smaller messages")
    scale = cap / prm.ref_Bps if prm.ref_Bps > 0 else np.ones_like(cap)
    kmin, kmax, xoff = prm.kmin_bytes * scale, prm.kmax_bytes * scale, prm.xoff_bytes * scale
    # a flow's line rate: its NIC port (the smallest link of its route it starts on)
    line = _flow_min(np.where(nic_link, cap, np.inf), at, has_route)
    line = np.where(np.isfinite(line), line, _flow_min(cap, at, has_route))
    f_scale = line / prm.ref_Bps if prm.ref_Bps > 0 else np.ones_like(line)
    ai, hai = prm.ai_Bps * f_scale, prm.hai_Bps * f_scale
    mtu = prm.mtu_bytes
    rc = line.copy()
    rt = line.copy()
    alpha = np.ones(n_flows)
    q = np.zeros(n_links)
    qmax = np.zeros(n_links)
    pause = np.zeros(n_links)
    sent = np.zeros(n_flows)
    finish = np.full(n_flows, np.nan)
    active = (sizes > 0) & has_route
    finish[~active] = 0.0
    history: collections.deque[tuple[float, np.ndarray]] = collections.deque([(0.0, np.zeros(n_flows))])
    floor = prm.min_rate_fraction * line
    seen = np.zeros(n_flows)  # expected marked packets not yet turned into a CNP
    cnp_alpha = np.zeros(n_flows, bool)  # a CNP since the last α tick / the last cut check
    cnp_cut = np.zeros(n_flows, bool)
    next_alpha = np.full(n_flows, prm.alpha_timer_s)
    next_cut = np.full(n_flows, prm.cnp_interval_s)
    next_inc = np.full(n_flows, prm.rate_timer_s)
    stage = np.zeros(n_flows, np.int64)  # increase events since the last cut
    bytes_left = np.full(n_flows, prm.byte_counter_bytes)
    switch = ~nic_link
    band = float(((kmax - kmin)[switch] / 8).min(initial=np.inf))
    marked = total = 0.0
    now = 0.0
    step = 0
    while active.any():
        if step >= MAX_STEPS:
            raise DistscopeError(f"dcqcn: flows still sending after {MAX_STEPS:,} steps ({now * 1e3:.3g} ms)")
        x = np.where(active, rc, 0.0)
        arr = a @ x
        over = np.where(arr > cap, cap / np.maximum(arr, 1e-30), 1.0)
        hold = np.where(nic_link | (q >= xoff), over, 1.0)  # NIC sharing; PFC at X_off
        x *= _flow_min(hold, at, has_route)
        arr = a @ x
        # the step: a queue moves at most an eighth of the RED band per step (incast onsets take small
        # steps, steady states large ones), never past τ/2 (every cut check is its own step)
        excess = float(np.where(switch, arr - cap, 0.0).max(initial=0.0))
        dt_s = float(np.clip(band / excess if excess > 0 else dt_max, DT_MIN, dt_cap))
        pause += np.where(switch & (q >= xoff) & (over < 1.0), dt_s, 0.0)
        q = np.where(switch, np.maximum(q + (arr - cap) * dt_s, 0.0), 0.0)
        qmax = np.maximum(qmax, q)
        # marking seen by each flow, one feedback delay late
        p_link = np.minimum(red(q, kmin, kmax, prm.pmax), 1.0 - 1e-12)
        p_now = np.minimum(-np.expm1(at @ np.log1p(-p_link)), 1.0 - 1e-9)
        while len(history) > 1 and history[1][0] <= now - prm.feedback_s:
            history.popleft()
        p = history[0][1]
        history.append((now + dt_s, p_now))
        # send
        left = sizes - sent
        done = active & (x * dt_s >= left)
        t_done = now + np.where(x > 0, left / np.maximum(x, 1e-30), dt_s)
        marked += float(np.dot(x, p) * dt_s)
        total += float(x.sum() * dt_s)
        sent = np.where(active, np.minimum(sent + x * dt_s, sizes), sent)
        if done.any():
            qdelay = at @ (q / cap)
            finish[done] = t_done[done] + qdelay[done]
            active &= ~done
        # the reaction point's state machine (module docstring): CNPs are the expected marked packets,
        # counted (a CNP each time a flow's count passes a whole packet)
        seen += x * dt_s / mtu * p
        cnp = active & (seen >= 1.0)
        seen[cnp] -= np.floor(seen[cnp])
        cnp_alpha |= cnp
        cnp_cut |= cnp
        # α's ticks in this step (k of them): the first after a CNP raises it by g, every one decays it
        k = np.maximum(np.floor((now + dt_s - next_alpha) / prm.alpha_timer_s) + 1, 0.0)
        tick = k > 0
        decay = (1 - prm.g) ** k[tick]
        alpha[tick] = decay * alpha[tick] + prm.g * decay / (1 - prm.g) * cnp_alpha[tick]
        cnp_alpha[tick] = False
        next_alpha[tick] += k[tick] * prm.alpha_timer_s
        due = now + dt_s >= next_cut  # a cut check: one cut at most, however many intervals passed
        cut = due & cnp_cut
        next_cut[due] += np.maximum(np.floor((now + dt_s - next_cut[due]) / prm.cnp_interval_s) + 1, 1.0) * \
            prm.cnp_interval_s
        if cut.any():
            move = cut & (prm.clamp_target | (stage > 0))  # unclamped: R_T only after an increase
            rt[move] = rc[move]
            rc[cut] = np.maximum(rc[cut] * (1 - alpha[cut] / 2), floor[cut])
            stage[cut] = 0
            bytes_left[cut] = prm.byte_counter_bytes
            next_inc[cut] = now + dt_s + prm.rate_timer_s
            cnp_cut[cut] = False
        bytes_left -= x * dt_s
        timer = active & (now + dt_s >= next_inc)
        counter = active & (bytes_left <= 0)
        for ev in (timer, counter):
            if ev.any():
                ai_stage = ev & (stage == prm.fast_recovery)
                hyper = ev & (stage > prm.fast_recovery)
                rt[ai_stage] += ai[ai_stage]
                rt[hyper] += hai[hyper]
                np.minimum(rt, line, out=rt)
                rc[ev] = (rt[ev] + rc[ev]) / 2
                stage[ev] += 1
        next_inc[timer] += prm.rate_timer_s
        bytes_left[counter] += prm.byte_counter_bytes
        now += dt_s
        step += 1
    res = FlowResult(finish_s=finish, link_bytes=link_bytes, makespan_s=float(np.nanmax(finish, initial=0.0)),
                     events=step)
    return CcResult(flows=res, max_queue_bytes=qmax, pause_s=pause,
                    marked_fraction=marked / total if total > 0 else 0.0)
