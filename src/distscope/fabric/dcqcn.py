"""DCQCN at flow level: the fluid model of RoCE congestion control, against the max-min ideal.

DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM'15) has three parts:
switches mark packets with ECN by RED on the egress queue (probability 0 below Kmin, rising to Pmax at
Kmax, 1 above); the receiver sends at most one CNP per flow per τ when marked packets arrive; the sender
cuts its current rate R_C by α/2 on a CNP (remembering it as the target R_T), tracks α by an EWMA with
gain g, and recovers toward R_T on timer (T) and byte-counter (B) events: fast recovery for F events,
then additive increase R_AI, then hyper increase R_HAI.

The rates follow the fluid model of Zhu et al., "ECN or Delay: Lessons Learnt from Analysis of DCQCN and
TIMELY" (CoNEXT'16, eqs. 1-6), per flow, with p the flow's marking probability one feedback delay ago:

    dα/dt  = g/τ' · ((1 - (1-p)^(τ'·R_C)) - α)
    dR_T/dt = -(R_T - R_C)·(1 - (1-p)^(τ·R_C))/τ + R_AI·R_C·[a_B(p) + a_T(p)]
    dR_C/dt = -R_C·α/2·(1 - (1-p)^(τ·R_C))/τ + (R_T - R_C)/2·R_C·[e_B(p) + e_T(p)]

with rates in packets, e_B = p / ((1-p)^-B - 1) the byte-counter events per packet sent (1/B at p = 0),
e_T the same for the timer's T·R_C packets, and a_X = (1-p)^(F·X)·e_X the events past fast recovery.
The hyper-increase stage, left out of that model, adds R_HAI - R_AI on the events where both counters
are past F. A flow's marking probability is 1 - Π_l (1-p_l)^f_l over its route (f_l: its share of
the flow, below 1 where the flow is sprayed). Queues are fluid, dq_l/dt = Σ_f f_l·x_f - C_l, on the
switch egress ports; a GPU's NIC shares its port among its own flows without a queue. PFC is modelled
as a hold: a queue at X_off admits only what it drains, pausing its flows in proportion (no spreading
of the pause to flows that do not cross the queue: head-of-line blocking is not modelled). A flow ends
when its last byte is sent plus the queueing delay on its route at that moment.

The defaults are the SIGCOMM'15 paper's (sec. 5, for 40 Gb/s links): Kmin 5 KB, Kmax 200 KB, Pmax 1%,
g 1/256, τ 50 µs, τ' 55 µs, T 55 µs, B 10 MB, R_AI 40 Mb/s, R_HAI 200 Mb/s, F 5. Kmin, Kmax, X_off
and the increase steps scale with the link rate (the thresholds as the bandwidth-delay product does);
X_off, 400 KB at 40 Gb/s, and the 1 KB packet are this model's choices.
"""

from __future__ import annotations

import collections
import dataclasses
import enum

import numpy as np
from scipy.sparse import csc_matrix, csr_matrix

from distscope.errors import DistscopeError, closest
from distscope.fabric.flows import FlowResult

REF_Bps = 40e9 / 8  # the link rate the paper's parameters are given for
MAX_STEPS = 200_000
DT_MIN = 0.02e-6


class CongestionControl(enum.Enum):
    """`none`: the max-min fair rates a perfect scheme converges to at once (flows.transfer);
    `dcqcn`: the fluid DCQCN model (this module)."""

    NONE = "none"
    DCQCN = "dcqcn"


def congestion_controls(text: str) -> list[CongestionControl]:
    """A comma list of congestion-control names, or one line naming the bad one."""
    out = []
    names = [c.value for c in CongestionControl]
    for part in text.split(","):
        name = part.strip().lower()
        if name not in names:
            raise DistscopeError(f"--cc {part.strip()!r} is not a congestion control{closest(name, names)}; "
                                 f"choose from {', '.join(names)}")
        out.append(CongestionControl(name))
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class DcqcnParams:
    """DCQCN's knobs at the reference rate `ref_Bps` (module docstring): thresholds and increase steps
    scale with each link's rate by link / ref_Bps (ref_Bps = 0: taken as given, at every rate)."""

    kmin_bytes: float = 5e3
    kmax_bytes: float = 200e3
    pmax: float = 0.01
    g: float = 1 / 256
    cnp_interval_s: float = 50e-6  # τ
    alpha_timer_s: float = 55e-6  # τ'
    rate_timer_s: float = 55e-6  # T
    byte_counter_bytes: float = 10e6  # B
    ai_Bps: float = 40e6 / 8
    hai_Bps: float = 200e6 / 8
    fast_recovery: int = 5  # F
    xoff_bytes: float = 400e3
    mtu_bytes: float = 1000.0
    feedback_s: float = 4e-6  # mark -> CNP -> sender: about one fabric RTT
    min_rate_fraction: float = 1e-3
    ref_Bps: float = REF_Bps

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
    steps: int


def red(q: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, pmax: float) -> np.ndarray:
    """RED/ECN marking probability of each queue (DCQCN's CP algorithm)."""
    ramp = pmax * (q - kmin) / (kmax - kmin)
    return np.where(q <= kmin, 0.0, np.where(q <= kmax, ramp, 1.0))


def _events_per_packet(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """p / ((1-p)^-n - 1): increase events per packet for a counter of n packets (1/n as p -> 0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        denom = np.expm1(-n * np.log1p(-p))
        out = np.where(p > 1e-12, p / np.where(denom > 0, denom, 1.0), 1.0 / np.maximum(n, 1e-12))
    return np.where(p > 1e-12, np.where(np.isfinite(denom) & (denom > 0), out, 0.0), out)


def _flow_min(values: np.ndarray, at: csr_matrix, has_route: np.ndarray) -> np.ndarray:
    """Per flow, the minimum of `values` over the links of its route (1 for a flow without one)."""
    out = np.ones(at.shape[0])
    vals = values[at.indices]
    starts = at.indptr[:-1][has_route]
    out[has_route] = np.minimum.reduceat(vals, starts)
    return out


def dcqcn_transfer(links: np.ndarray, flows: np.ndarray, fracs: np.ndarray, sizes_bytes: np.ndarray,
                   cap_Bps: np.ndarray, nic_link: np.ndarray, params: DcqcnParams | None = None,
                   dt_fixed: float = 0.0) -> CcResult:
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
    dt_max = prm.cnp_interval_s / 10
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
        # steps, steady states large ones), never past τ/10 (the rate dynamics' time scale)
        excess = float(np.where(switch, arr - cap, 0.0).max(initial=0.0))
        dt_s = dt_fixed or float(np.clip(band / excess if excess > 0 else dt_max, DT_MIN, dt_cap))
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
        # DCQCN rate dynamics (module docstring), in packets
        pk = rc / mtu
        cut = -np.expm1(prm.cnp_interval_s * pk * np.log1p(-p))
        cut_a = -np.expm1(prm.alpha_timer_s * pk * np.log1p(-p))
        nb = np.full(n_flows, prm.byte_counter_bytes / mtu)
        nt = prm.rate_timer_s * pk
        eb, et = _events_per_packet(p, nb), _events_per_packet(p, nt)
        past_b = np.exp(prm.fast_recovery * nb * np.log1p(-p))
        past_t = np.exp(prm.fast_recovery * nt * np.log1p(-p))
        d_alpha = prm.g / prm.alpha_timer_s * (cut_a - alpha)
        d_rt = (-(rt - rc) * cut / prm.cnp_interval_s
                + pk * (ai * (past_b * eb + past_t * et) + (hai - ai) * past_b * past_t * et))
        d_rc = -rc * alpha / 2 * cut / prm.cnp_interval_s + (rt - rc) / 2 * pk * (eb + et)
        alpha = np.clip(alpha + d_alpha * dt_s, 0.0, 1.0)
        rt = np.clip(rt + d_rt * dt_s, prm.min_rate_fraction * line, line)
        rc = np.clip(rc + d_rc * dt_s, prm.min_rate_fraction * line, line)
        now += dt_s
        step += 1
    res = FlowResult(finish_s=finish, link_bytes=link_bytes, makespan_s=float(np.nanmax(finish, initial=0.0)),
                     events=step)
    return CcResult(flows=res, max_queue_bytes=qmax, pause_s=pause,
                    marked_fraction=marked / total if total > 0 else 0.0, steps=step)
