"""`serve estimate`: closed-form TTFT, TPOT, latency and throughput of one replica (×replicas).

- static batch B: one prefill of B prompts (TTFT), then decode steps with B sequences whose context
  grows from I to I+O (TPOT = mean step), throughput = B·O / (TTFT + (O−1)·TPOT);
- concurrency C (all replicas' clients, C/replicas each, as `serve simulate` counts them): continuous
  batching in steady state with n = min(C/replicas, max_batch) sequences per replica; each
  iteration decodes n tokens and, amortised, prefills n·I/O prompt tokens (one prompt per O steps per
  sequence); TTFT = one prompt's prefill at that load, plus the wait of the C − n clients that do not
  fit (Little's law: wait = (C/replicas − n) / request throughput);
- rate R: the same steady state at the n that Little's law gives (n = R · latency(n)); a rate above
  the replica's capacity is reported as such.
`serve simulate` gives distributions and queueing; this is the mean-value view, one evaluation.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from distscope.errors import DistscopeError
from distscope.serve.cost import kv_bytes_per_token_layer, stage_layers
from distscope.serve.replica import Replica


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServeEstimate:
    ttft_s: float
    tpot_s: float
    latency_s: float
    throughput_out_tok_s: float
    throughput_req_s: float
    batch: float  # sequences decoding at once (mean)
    max_batch: int
    kv_cache_bytes: float  # per GPU
    kv_cache_tokens: int  # per replica
    weights_bytes: float  # per GPU
    workspace_bytes: float  # per GPU
    decode_crossover_tokens: float
    comm_bytes_per_token: dict[str, float]
    replicas: int
    saturated: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["memory_per_gpu_bytes"] = self.weights_bytes + self.workspace_bytes + self.kv_cache_bytes
        return d


def comm_bytes_per_token(rep: Replica) -> dict[str, float]:
    """Bytes one GPU sends per token through the model: TP all-reduce (ring traffic 2(n−1)/n of the
    [h] activation, twice per layer), PP send of [h] per stage boundary, EP: carried by the TP
    all-reduce (comm.py)."""
    tp, pp = rep.layout.tp, rep.layout.pp
    e = rep.prec.act16.bytes
    h = rep.spec.hidden
    L = stage_layers(rep.spec, pp)
    return {"tp": 2 * L * 2 * (tp - 1) / tp * h * e if tp > 1 else 0.0, "pp": h * e if pp > 1 else 0.0, "ep": 0.0}


def _steady(rep: Replica, n: float, inp: int, out: int) -> tuple[float, float]:
    """(decode-iteration seconds, TTFT seconds) with n sequences decoding and prefill amortised."""
    pre_tokens = n * inp / out
    ctx = n * (inp + out / 2)
    units = n / out * inp * inp / 2
    step = rep.iteration_s(n + pre_tokens, max(1, round(n)), ctx, units, n + n / out)
    # one prompt's prefill alongside the running decodes
    ttft = rep.iteration_s(n + inp, max(1, round(n)) + 1, ctx, inp * inp / 2, n + 1)
    return step, ttft


def estimate(rep: Replica, *, input_len: int, output_len: int, batch: int | None = None, concurrency: int | None = None,
             rate_per_s: float | None = None, replicas: int = 1) -> ServeEstimate:
    given = [x is not None for x in (batch, concurrency, rate_per_s)]
    if sum(given) != 1:
        raise DistscopeError("give exactly one of --batch, --concurrency, --rate")
    inp, out = input_len, output_len
    mem = rep.memory
    max_batch = mem.max_batch(inp + out, rep.stack.max_num_seqs)
    if max_batch < 1:
        raise DistscopeError(f"kv cache holds {mem.kv_tokens} tokens per replica but one request needs {inp + out} "
                             f"(input_len={inp}, output_len={out}): raise --tp/--pp or use --kv fp8")
    note = ""
    saturated = False
    if batch is not None:
        if batch < 1:
            raise DistscopeError(f"--batch={batch} must be >= 1")
        b = batch
        if batch > max_batch:
            note = f"batch {batch} exceeds the {max_batch} requests the KV cache holds; it runs in {math.ceil(batch / max_batch)} waves"
            b = max_batch
        ttft = rep.iteration_s(b * inp, b, 0.0, b * inp * inp / 2, b)
        steps = max(out - 1, 0)
        # mean decode step: context grows linearly, the step is affine in it
        tpot = rep.iteration_s(b, b, b * (inp + out / 2), 0.0, b) if steps else 0.0
        waves = math.ceil(batch / b)
        latency = ttft + steps * tpot
        thr_req = batch / (waves * latency)
        n_mean: float = b
    else:
        if concurrency is not None:
            if concurrency < 1:
                raise DistscopeError(f"--concurrency={concurrency} must be >= 1")
            per_replica = concurrency / replicas  # the clients of all replicas, spread evenly (as serve simulate)
            n: float = min(per_replica, max_batch)
            step, ttft = _steady(rep, n, inp, out)
            latency = ttft + (out - 1) * step
            thr_req = n / latency
            if per_replica > n:
                ttft += (per_replica - n) / thr_req
                latency = ttft + (out - 1) * step
                note = (f"{(per_replica - n) * replicas:.0f} of {concurrency} clients wait: the KV cache holds "
                        f"{max_batch} requests per replica")
            tpot = step
            n_mean = n
        else:
            assert rate_per_s is not None
            if not rate_per_s > 0:
                raise DistscopeError(f"--rate={rate_per_s} must be > 0")
            r = rate_per_s / replicas
            step, ttft = _steady(rep, max_batch, inp, out)
            cap = max_batch / (ttft + (out - 1) * step)
            if r >= cap:
                saturated = True
                note = f"rate {rate_per_s:g}/s exceeds the capacity of {cap * replicas:.3g} requests/s: queues grow without bound"
                n = max_batch
            else:
                n = 1.0
                for _ in range(60):  # Little's law fixed point, damped
                    step, ttft = _steady(rep, n, inp, out)
                    n_new = min(max_batch, r * (ttft + (out - 1) * step))
                    if abs(n_new - n) < 1e-3:
                        break
                    n = 0.5 * (n + max(n_new, 1e-3))
            step, ttft = _steady(rep, n, inp, out)
            tpot = step
            latency = ttft + (out - 1) * step if not saturated else math.inf
            thr_req = min(r, n / (ttft + (out - 1) * step))
            if saturated:
                ttft = math.inf
            n_mean = n
    tok_per_gpu = stage_layers(rep.spec, rep.layout.pp) * kv_bytes_per_token_layer(rep.spec, rep.layout.tp, rep.prec.kv)
    assert tok_per_gpu > 0
    return ServeEstimate(
        ttft_s=ttft, tpot_s=tpot, latency_s=latency, throughput_out_tok_s=thr_req * out * replicas,
        throughput_req_s=thr_req * replicas, batch=n_mean, max_batch=max_batch, kv_cache_bytes=mem.kv_budget_bytes,
        kv_cache_tokens=mem.kv_tokens, weights_bytes=mem.weights_bytes, workspace_bytes=mem.workspace_bytes,
        decode_crossover_tokens=rep.step.decode_crossover_tokens(), comm_bytes_per_token=comm_bytes_per_token(rep),
        replicas=replicas, saturated=saturated, note=note,
    )
