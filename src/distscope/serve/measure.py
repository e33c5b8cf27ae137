"""`serve measure`: ground truth on this machine. The examples' GPT (examples/gpt.py, random weights,
fp32, CPU, one thread) served by a real continuous-batching loop with Poisson arrivals; per-request
TTFT and TPOT recorded with the wall clock. Then the same load is simulated by `serve simulate`'s engine
(engine.py, the VLLM policy this loop implements) with this machine's iteration costs, and the two are
compared.

The loop, like vLLM ≤ 0.5: FCFS; whenever requests wait and fewer than `max_batch` run, one
prefill-only iteration prefills as many as fit (their prompts batched) and emits each one's first
token; otherwise one decode iteration advances every running sequence by one token (greedy argmax).
Idle time is spent polling, not sleeping. Clock: by default the serving thread's CPU time
(`time.thread_time`, torch on one thread), for the loop and the profile alike, so time other processes
take on a shared core counts in neither; on an idle core it is the wall time (`--clock wall`). KV cache: a preallocated pool of `max_batch` slots per layer; decode attention runs over the slots'
padded contexts with a mask (one batched kernel, as a paged kernel would).

Iteration costs. A kernel profile (`distscope measure kernels`, fid-cal's) prices the kernels an
iteration launches (KernelStep, `--kernels`); for a model this small on a CPU it misses most of the
cost — PyTorch's per-op dispatch and the module calls around ~60 ops per layer, which no kernel
table holds (measured: decode predicted 0.7 ms against 3 ms) — so the prediction that is checked
prices the loop's own iterations, measured apart from the served requests (Profiler): a
prefill iteration for every batch size, a decode iteration for every batch size at three contexts (each
right after a decode of its batch, as served decodes run), in a shuffled order, before and after the run
and in its idle gaps; the table of medians is what the
simulator reads (interpolated in the context). The timing spread is reported. Those samples are warm (each
job follows another); a served prefill at a low arrival rate follows an idle spell, and on a shared host
that costs it its caches: the profile also times a prefill after such a spell (Profiler.wake), and the
simulator charges the difference to the iteration that ends each idle spell (replica.Wake). Only this
module imports torch.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from distscope.errors import DistscopeError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeasureConfig:
    rate_per_s: float = 4.0
    requests: int = 40
    input_len: int = 32
    output_len: int = 16
    max_batch: int = 8
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    vocab: int = 512
    seed: int = 0
    threads: int = 1
    clock: str = "thread"  # "thread" (CPU time of the serving thread) or "wall"

    def __post_init__(self) -> None:
        for f in ("requests", "input_len", "output_len", "max_batch", "layers", "hidden", "heads", "vocab", "threads"):
            if getattr(self, f) < 1:
                raise DistscopeError(f"--{f.replace('_', '-')}={getattr(self, f)} must be >= 1")
        if not self.rate_per_s > 0:
            raise DistscopeError(f"--rate={self.rate_per_s} must be > 0")
        if self.hidden % self.heads:
            raise DistscopeError(f"--hidden={self.hidden} must be divisible by --heads={self.heads}")
        if self.clock not in ("thread", "wall"):
            raise DistscopeError(f"--clock={self.clock!r} must be thread or wall")

    @property
    def now(self) -> Any:
        return time.thread_time if self.clock == "thread" else time.perf_counter


def _gpt_module() -> ModuleType:
    path = EXAMPLES / "gpt.py"
    if not path.is_file():
        raise DistscopeError(f"serve measure runs the repository's examples/gpt.py; not found at {path}")
    spec = importlib.util.spec_from_file_location("distscope_examples_gpt", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


class Server:
    """The GPT with a slot-based KV cache and the two iteration kinds of the serving loop."""

    def __init__(self, cfg: MeasureConfig) -> None:
        import torch

        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        gpt = _gpt_module()
        self.cfg = cfg
        self.T = cfg.input_len + cfg.output_len
        gcfg = gpt.GPTConfig(vocab=cfg.vocab, seq_len=self.T, hidden=cfg.hidden, heads=cfg.heads, layers=cfg.layers,
                             ffn_hidden=4 * cfg.hidden)
        self.model = gpt.GPT(gcfg).eval()
        self.hd = cfg.hidden // cfg.heads
        shape = (cfg.max_batch, cfg.heads, self.T, self.hd)
        self.k = [torch.zeros(shape) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape) for _ in range(cfg.layers)]
        self.free = list(range(cfg.max_batch))

    def _block(self, blk: Any, x: Any, layer: int, slots: Any, pos: Any, causal: bool) -> Any:
        """One Block (examples/gpt.py) over new tokens x [b, s, h], reading/writing the slots' KV."""
        import torch
        import torch.nn.functional as F

        b, s, _ = x.shape
        qkv = blk.qkv(blk.ln1(x))
        q, k, v = qkv.view(b, s, 3, blk.local_heads, self.hd).permute(2, 0, 3, 1, 4)  # [b, heads, s, hd]
        K, V = self.k[layer], self.v[layer]
        if causal:  # prefill: the prompt attends to itself; its KV goes into the slots
            K[slots, :, :s] = k
            V[slots, :, :s] = v
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # decode: write the new token's KV at pos, attend over each slot's context
            K[slots, :, pos] = k[:, :, 0]
            V[slots, :, pos] = v[:, :, 0]
            L = int(pos.max()) + 1
            mask = torch.arange(L)[None, :] <= pos[:, None]  # [b, L]
            a = F.scaled_dot_product_attention(q, K[slots, :, :L], V[slots, :, :L], attn_mask=mask[:, None, None, :])
        a = a.transpose(1, 2).reshape(b, s, blk.local_heads * self.hd)
        x = x + blk.proj(a) + blk.proj_bias
        return x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x)))) + blk.fc2_bias

    def prefill(self, tokens: Any, slots: list[int]) -> list[int]:
        """Prompts [k, P] into `slots`; returns each one's first token (greedy)."""
        import torch

        with torch.inference_mode():
            m = self.model
            x = m.embed(tokens)
            idx = torch.tensor(slots)
            for i, blk in enumerate(m.blocks):
                x = self._block(blk, x, i, idx, None, True)
            logits = m.head(x[:, -1:, :])
            return logits[:, 0].argmax(-1).tolist()

    def decode(self, last: list[int], slots: list[int], pos: list[int]) -> list[int]:
        """One token for each running sequence: input token `last[i]` at position `pos[i]`."""
        import torch

        with torch.inference_mode():
            m = self.model
            p = torch.tensor(pos)
            x = m.embed.tok(torch.tensor(last)[:, None]) + m.embed.pos(p)[:, None, :]
            idx = torch.tensor(slots)
            for i, blk in enumerate(m.blocks):
                x = self._block(blk, x, i, idx, p, False)
            return m.head(x)[:, 0].argmax(-1).tolist()


@dataclasses.dataclass
class _Req:
    rid: int
    arrival: float
    slot: int = -1
    last: int = 0
    done: int = 0
    first: float = math.nan
    finish: float = math.nan


def serve_real(cfg: MeasureConfig, server: Server | None = None, log: list[tuple[str, int, int, float]] | None = None,
               idle: Any = None) -> dict[str, np.ndarray]:
    """Run the served load in real time; per-request arrival, first-token and finish times (s). `log`
    collects (kind, sequences, Σctx, seconds) per iteration."""
    import torch

    srv = server or Server(cfg)
    rng = np.random.default_rng(cfg.seed)
    arrivals = np.cumsum(rng.exponential(1.0 / cfg.rate_per_s, cfg.requests))
    prompts = torch.randint(0, cfg.vocab, (cfg.requests, cfg.input_len), generator=torch.Generator().manual_seed(cfg.seed))
    reqs = [_Req(rid=i, arrival=float(a)) for i, a in enumerate(arrivals)]
    waiting: list[_Req] = []
    running: list[_Req] = []
    nxt = 0
    finished = 0
    deadline = float(arrivals[-1]) + 60.0 + 2.0 * cfg.requests * cfg.output_len * 0.05
    clock = cfg.now
    wall0 = time.perf_counter()
    t0 = clock()
    while finished < cfg.requests:
        now = clock() - t0
        if time.perf_counter() - wall0 > 4 * deadline:
            raise DistscopeError(f"serve measure: the run exceeded {4 * deadline:.0f} s of wall time")
        if now > deadline:
            raise DistscopeError(f"serve measure: the run exceeded its {deadline:.0f} s limit")
        while nxt < cfg.requests and reqs[nxt].arrival <= now:
            waiting.append(reqs[nxt])
            nxt += 1
        if waiting and len(running) < cfg.max_batch:
            batch = waiting[: cfg.max_batch - len(running)]
            del waiting[: len(batch)]
            slots = [srv.free.pop() for _ in batch]
            t_start = clock() - t0
            first = srv.prefill(prompts[[r.rid for r in batch]], slots)
            t = clock() - t0
            if log is not None:
                log.append(("p", len(batch), 0, t - t_start))
            for r, s, tok in zip(batch, slots, first, strict=True):
                r.slot, r.last, r.done, r.first = s, tok, 1, t
                if r.done >= cfg.output_len:
                    r.finish = t
                    srv.free.append(s)
                    finished += 1
                else:
                    running.append(r)
        elif running:
            pos = [cfg.input_len + r.done - 1 for r in running]
            t_start = clock() - t0
            toks = srv.decode([r.last for r in running], [r.slot for r in running], pos)
            t = clock() - t0
            if log is not None:
                log.append(("d", len(running), len(running) * (max(pos) + 1), t - t_start))
            keep = []
            for r, tok in zip(running, toks, strict=True):
                r.last, r.done = tok, r.done + 1
                if r.done >= cfg.output_len:
                    r.finish = t
                    srv.free.append(r.slot)
                    finished += 1
                else:
                    keep.append(r)
            running = keep
        elif nxt < cfg.requests:
            # spin until the next arrival: a sleeping core comes back with cold caches and clocks, which
            # the back-to-back profile never sees (the same reason GPU servers keep polling)
            while clock() - t0 < reqs[nxt].arrival:
                if idle is None or not idle(reqs[nxt].arrival - (clock() - t0)):
                    pass
    return {"arrival": arrivals, "first": np.array([r.first for r in reqs]), "finish": np.array([r.finish for r in reqs]),
            "out": np.full(cfg.requests, cfg.output_len)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class IterationProfile:
    """Measured iteration costs of this loop on this machine, as tables (median seconds):
    prefill_s[k-1] for k prompts of input_len tokens; decode_s[n-1][j] for n sequences whose padded
    context is ctx_grid[j] (decode time is interpolated linearly in the context)."""

    input_len: int
    prefill_s: tuple[float, ...]
    ctx_grid: tuple[int, ...]
    decode_s: tuple[tuple[float, ...], ...]
    spread: float  # median |sample − median| / median over all grid points: the machine's timing noise
    wake_after_s: float = math.inf  # the idle spell before a cold sample (Profiler.wake)
    wake_s: float = 0.0  # a one-prompt prefill after that spell, less the warm one (medians; at least 0)
    source: str = "serve measure: this loop's iterations timed offline, shuffled, median per grid point"


WAKE_SAMPLES = 9  # cold prefills per profile (Profiler.wake)


class Profiler:
    """This loop's own prefill and decode iterations: a prefill for every batch size and a decode for
    every batch size at three contexts, timed one job at a time in a shuffled order (so shapes change
    from job to job, as a served prefill's do). A decode is timed right after an untimed decode of the
    same batch at the context before: while serving, a decode iteration follows the previous one of the
    same batch (a request decodes its tokens back to back; the batch changes only when one joins or
    leaves). Timed after another job instead, a decode ran slower than the served run's: p50 TPOT was
    predicted +21.6% and +29.1% (two runs), and +8.6% and +12.7% when timed this way (2026-11-28,
    tests/serve/test_serve_measure.py).
    Samples are taken before the served run and in its idle gaps (`idle`, only when the next arrival is
    further away than `guard` times the slowest job), so the profile sees the machine in the state the
    run sees it; it never touches a running request."""

    def __init__(self, srv: Server, guard: float = 3.0) -> None:
        import torch

        cfg = srv.cfg
        self.srv, self.cfg, self.guard = srv, cfg, guard
        self.P = cfg.input_len
        self.ks = list(range(1, cfg.max_batch + 1))
        self.ctxs = sorted({self.P + 1, self.P + cfg.output_len // 2, self.P + cfg.output_len})
        self.jobs: list[tuple[str, int, int]] = [("p", k, 0) for k in self.ks] + [("d", n, c) for n in self.ks for c in self.ctxs]
        self.toks = {k: torch.randint(0, cfg.vocab, (k, self.P)) for k in self.ks}
        self.rng = np.random.default_rng(cfg.seed + 7)
        self.samples: dict[tuple[str, int, int], list[float]] = {j: [] for j in self.jobs}
        self.queue: list[int] = []
        self.slowest = 0.0
        self.cold: list[float] = []
        self.wake_after_s = math.inf

    def _run(self, j: tuple[str, int, int]) -> float:
        kind, k, c = j
        clock = self.cfg.now
        if kind == "d":  # untimed: the decode of the same batch a served decode follows (class docstring)
            self.srv.decode([1] * k, list(range(k)), [c - 2] * k)
        t = clock()
        if kind == "p":
            self.srv.prefill(self.toks[k], list(range(k)))
        else:
            self.srv.decode([1] * k, list(range(k)), [c - 1] * k)
        return float(clock() - t)

    def passes(self, n: int, warm: bool = False) -> None:
        for _ in range(n):
            for i in self.rng.permutation(len(self.jobs)):
                dt = self._run(self.jobs[int(i)])
                self.slowest = max(self.slowest, dt)
                if not warm:
                    self.samples[self.jobs[int(i)]].append(dt)

    def wake(self, repeats: int) -> None:
        """Cold samples: a one-prompt prefill after the loop has spun `guard` × the slowest job, the idle
        spell a served prefill follows at a low arrival rate (the profiler never works that close to an
        arrival). On a shared host an idle spell lets the caches go cold: measured 2026-11-26 on this
        2-core host, 4.6-4.9 ms after 50 ms of spinning, sleeping or polling against 3.3-3.9 ms warm."""
        clock = self.cfg.now
        self.wake_after_s = self.guard * self.slowest
        for _ in range(repeats):
            t = clock()
            while clock() - t < self.wake_after_s:
                pass
            self.cold.append(self._run(("p", 1, 0)))

    def idle(self, gap_s: float) -> bool:
        """Run one job if the next arrival is far enough away; False when it did nothing."""
        if gap_s < self.guard * self.slowest or len(self.srv.free) < self.cfg.max_batch:
            return False
        if not self.queue:
            self.queue = [int(i) for i in self.rng.permutation(len(self.jobs))]
        j = self.jobs[self.queue.pop()]
        self.samples[j].append(self._run(j))
        return True

    def profile(self) -> IterationProfile:
        med = {j: float(np.median(v)) for j, v in self.samples.items()}
        spread = float(np.median([abs(x - med[j]) / med[j] for j, v in self.samples.items() for x in v]))
        wake = max(float(np.median(self.cold)) - med[("p", 1, 0)], 0.0) if self.cold else 0.0
        return IterationProfile(input_len=self.P, prefill_s=tuple(med[("p", k, 0)] for k in self.ks), ctx_grid=tuple(self.ctxs),
                                decode_s=tuple(tuple(med[("d", n, c)] for c in self.ctxs) for n in self.ks), spread=spread,
                                wake_after_s=self.wake_after_s, wake_s=wake)


def profile_iterations(srv: Server, repeats: int = 5) -> IterationProfile:
    """Offline only: `repeats` shuffled passes after one warm-up pass."""
    prof = Profiler(srv)
    prof.passes(1, warm=True)
    prof.passes(repeats)
    prof.wake(WAKE_SAMPLES)
    return prof.profile()


class ProfiledStep:
    """A StepTimes (cost.py) read from an IterationProfile. Decode is made affine in the summed context,
    t = a_n + b·Σctx (one slope b fitted over every batch size by least squares, an intercept per batch),
    the form the simulator's closed-form decode runs rely on."""

    def __init__(self, prof: IterationProfile) -> None:
        self.prof = prof
        g = np.array(prof.ctx_grid, dtype=float)
        rows = [(n, g * n, np.array(r)) for n, r in enumerate(prof.decode_s, 1)]
        # common slope: regress the per-batch centred times on the per-batch centred contexts
        num = sum(float(((c - c.mean()) * (t - t.mean())).sum()) for _, c, t in rows)
        den = sum(float(((c - c.mean()) ** 2).sum()) for _, c, t in rows)
        self.kv_s_per_ctx_token = max(num / den, 0.0) if den > 0 else 0.0
        self.a = [float((t - self.kv_s_per_ctx_token * c).mean()) for _, c, t in rows]

    def time_s(self, tokens: float, ctx: float = 0.0, attn_units: float = 0.0, rows: float = 0.0) -> float:
        p = self.prof
        if attn_units > 0:  # prefill iteration of k prompts (the loop never mixes the two kinds)
            k = min(max(round(tokens / p.input_len), 1), len(p.prefill_s))
            return p.prefill_s[k - 1]
        n = min(max(round(tokens), 1), len(self.a))
        return self.a[n - 1] + self.kv_s_per_ctx_token * ctx

    def decode_crossover_tokens(self) -> float:
        return math.inf


def kernel_sweep() -> Any:
    """The `measure kernels` sweep this model's shapes need (fp32 on CPU): GEMM M from one decode token to
    a batched prefill, N and K over h..4h; attention over short sequences; element-wise down to 1 KiB,
    whose time is the per-op floor of PyTorch's dispatch."""
    from distscope.dtypes import DType
    from distscope.measure.kernels import KernelSweep

    return KernelSweep(gemm_m=(1, 2, 4, 8, 16, 32, 64, 128, 256), gemm_nk=(256, 512, 1024, 2048),
                       attn_seq=(4, 8, 16, 32, 64), attn_head_dim=(32, 64, 128), attn_tokens=256, attn_width=256,
                       elementwise_bytes=(1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 22), dtypes=(DType.FP32,),
                       warmup=2, iters=9)


class KernelStep:
    """A StepTimes composed from a kernel profile (measure/kernel_profile.py): this GPT's iteration as the
    kernels the serving loop launches, each priced by the measured tables — per layer the four GEMMs,
    the attention (causal over the prompt in prefill; over the padded context in decode), and the
    element-wise passes (norms, bias and residual adds, GELU, KV writes, decode's KV gather), each at
    least the smallest element-wise call's time (the per-op dispatch floor); per iteration the
    embedding, final norm, LM head and argmax."""

    def __init__(self, kp: Any, cfg: MeasureConfig) -> None:
        from distscope.dtypes import DType

        self.kp, self.cfg, self.dt = kp, cfg, DType.FP32
        self.floor = kp.mem_time_s(kp.elementwise.axes[0][0])
        # decode made affine in Σctx for the simulator's closed-form runs: the slope between the shortest
        # and the longest context a sequence reaches, at the largest batch
        n, L0, L1 = cfg.max_batch, cfg.input_len + 1, cfg.input_len + cfg.output_len
        self.kv_s_per_ctx_token = max(0.0, (self._decode(n, n * L1) - self._decode(n, n * L0)) / (n * (L1 - L0)))
        self.a = [self._decode(k, k * L0) - self.kv_s_per_ctx_token * k * L0 for k in range(1, n + 1)]

    def _el(self, nbytes: float) -> float:
        return max(self.floor, self.kp.mem_time_s(nbytes))

    def _layer(self, M: float, attn: float, kv_gather_bytes: float, extra_ops: int) -> float:
        h = self.cfg.hidden
        g = self.kp.gemm_time_s
        t = g(self.dt, M, 3 * h, h) + g(self.dt, M, h, h) + g(self.dt, M, 4 * h, h) + g(self.dt, M, h, 4 * h) + attn
        e = 4.0 * M * h  # one fp32 activation
        for nbytes in (2 * e, 2 * e, 2 * e, 2 * e, 3 * e, 3 * e, 2 * e, 8 * e, 3 * e, 3 * e):
            t += self._el(nbytes)  # ln1, K write, V write, head merge, +bias, +res, ln2, gelu, +bias, +res
        if kv_gather_bytes:
            t += 2 * self._el(kv_gather_bytes)
        return t + extra_ops * self.floor

    def _tail(self, M: float, rows: float) -> float:
        h = self.cfg.hidden
        return (3 * self._el(8.0 * M * h) + self._el(8.0 * rows * h)
                + self.kp.gemm_time_s(self.dt, rows, self.cfg.vocab, h) + self.floor)

    def _prefill(self, k: float) -> float:
        c = self.cfg
        M = k * c.input_len
        hd = c.hidden // c.heads
        attn = self.kp.attention_time_s(self.dt, True, k * c.heads, c.input_len, c.input_len, hd)[0]
        return c.layers * self._layer(M, attn, 0.0, 0) + self._tail(M, k)

    def _decode(self, n: float, ctx: float) -> float:
        c = self.cfg
        L = max(ctx / max(n, 1), 1.0)
        hd = c.hidden // c.heads
        attn = self.kp.attention_time_s(self.dt, False, n * c.heads, 1, L, hd)[0]
        gather = 2.0 * 4.0 * n * L * c.hidden  # K (or V) of the slots copied out, read + write
        return c.layers * self._layer(n, attn, gather, 2) + self._tail(n, n)  # + mask arange/compare

    def time_s(self, tokens: float, ctx: float = 0.0, attn_units: float = 0.0, rows: float = 0.0) -> float:
        if attn_units > 0:
            return self._prefill(max(tokens / self.cfg.input_len, 1.0))
        n = min(max(round(tokens), 1), len(self.a))
        return self.a[n - 1] + self.kv_s_per_ctx_token * ctx

    def decode_crossover_tokens(self) -> float:
        return math.inf


def predict(cfg: MeasureConfig, prof: Any) -> dict[str, np.ndarray]:
    """`serve simulate` of the measured load: the engine's VLLM policy with this machine's iteration costs."""
    from distscope.serve.engine import Ledger, ReplicaSim
    from distscope.serve.layout import Layout
    from distscope.serve.memory import ReplicaMemory
    from distscope.serve.precision import ServePrecision
    from distscope.serve.replica import Replica, Wake
    from distscope.serve.requests import Arrival, Workload, arrival_times
    from distscope.serve.stack import KvBudget, Launch, Policy, Stack
    from distscope.sim.loop import EventLoop
    from distscope.system.presets import get_cluster
    from distscope.workload.spec import FfnKind, ModelSpec, NormKind, PositionKind

    spec = ModelSpec(name="examples-gpt", layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, kv_heads=cfg.heads,
                     ffn_hidden=4 * cfg.hidden, vocab=cfg.vocab, ffn=FfnKind.GELU, position=PositionKind.LEARNED,
                     max_positions=cfg.input_len + cfg.output_len, norm=NormKind.LAYERNORM, bias=True)
    stack = Stack(name="serve-measure", policy=Policy.VLLM, max_num_seqs=cfg.max_batch, max_batched_tokens=1 << 30,
                  block_tokens=1, kv_fraction=1.0, kv_budget=KvBudget.OF_TOTAL,
                  step_cpu_s=0.0, seq_cpu_s=0.0, cpu_overlapped=False, launch=Launch.NONE)
    T = cfg.input_len + cfg.output_len
    mem = ReplicaMemory(weights_bytes=0.0, workspace_bytes=0.0, kv_budget_bytes=float(cfg.max_batch * T), kv_bytes_per_token=1.0,
                        block_tokens=1)
    step = prof if isinstance(prof, KernelStep) else ProfiledStep(prof)
    wake = Wake(after_s=prof.wake_after_s, cost_s=prof.wake_s) if isinstance(prof, IterationProfile) else None
    rep = Replica(spec=spec, cluster=get_cluster("dgx-h100", 1), layout=Layout(), prec=ServePrecision(), stack=stack,
                  step=step, memory=mem, wake=wake)
    w = Workload(arrival=Arrival.POISSON, requests=cfg.requests, input_len=cfg.input_len, output_len=cfg.output_len,
                 rate_per_s=cfg.rate_per_s, seed=cfg.seed)
    times = arrival_times(w)
    assert times is not None
    inp = np.full(cfg.requests, cfg.input_len)
    out = np.full(cfg.requests, cfg.output_len)
    led = Ledger(inp, out)
    loop = EventLoop()
    sim = ReplicaSim(loop, rep, led, lambda _rid: None)
    for i, t in enumerate(times):
        def arrive(i: int = i) -> None:
            led.arrival[i] = loop.now
            sim.submit(i)

        loop.at(float(t), arrive, priority=-1)
    loop.run()
    return {"arrival": np.array(led.arrival), "first": np.array(led.first), "finish": np.array(led.finish), "out": out}


def stats(r: dict[str, np.ndarray]) -> dict[str, float]:
    ttft = r["first"] - r["arrival"]
    tpot = (r["finish"] - r["first"]) / np.maximum(r["out"] - 1, 1)
    return {"ttft_s_p50": float(np.median(ttft)), "tpot_s_p50": float(np.median(tpot)), "ttft_s_mean": float(ttft.mean()),
            "tpot_s_mean": float(tpot.mean()),
            "throughput_out_tok_s": float(r["out"].sum() / (np.nanmax(r["finish"]) - r["arrival"].min()))}


def measure_and_predict(cfg: MeasureConfig, profile: str | None = None, kernels: bool = False) -> dict[str, Any]:
    """Serve for real; predict from this loop's iteration profile and, with `kernels` (or a `profile`
    file), also from a kernel profile (`distscope measure kernels`, run here with kernel_sweep())."""
    kp = None
    if profile is not None:
        from distscope.measure.profile import load_profile

        kp = load_profile(Path(profile)).kernels
        if kp is None:
            raise DistscopeError(f"--profile={profile!r} has no kernels section (run distscope measure kernels)")
    elif kernels:
        from distscope.measure.kernels import measure_kernels

        kp = measure_kernels(kernel_sweep(), "cpu")
    srv = Server(cfg)
    profiler = Profiler(srv)
    profiler.passes(1, warm=True)
    profiler.passes(2)
    profiler.wake(WAKE_SAMPLES)
    real = serve_real(cfg, srv, idle=profiler.idle)
    profiler.passes(2)
    prof = profiler.profile()
    m = stats(real)
    p = stats(predict(cfg, prof))
    out: dict[str, Any] = {"config": dataclasses.asdict(cfg), "iteration_profile": dataclasses.asdict(prof), "measured": m,
                           "predicted": p, "error_pct": {k: 100.0 * (p[k] - m[k]) / m[k] for k in m}}
    if kp is not None:
        pk = stats(predict(cfg, KernelStep(kp, cfg)))
        out.update(kernel_profile=kp.source, predicted_from_kernels=pk,
                   error_pct_from_kernels={k: 100.0 * (pk[k] - m[k]) / m[k] for k in m})
    return out
