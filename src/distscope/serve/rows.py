"""Read the serving-runs CSV contract (data/validation/README.md, `serving_runs.csv`) into typed rows.

Columns become enums and numbers here, once. A row whose lengths or scenario cannot be reproduced is
kept with a `skip` reason per metric instead of a guess:
- an unknown input length (len_quality `*isl_unknown*`, blank input_len) skips the whole row;
- an unknown output length (`*osl_unknown*`, blank output_len) skips every metric that depends on
  it: throughput, TPOT, latency, and TTFT under load (a single request's TTFT is still reproducible);
- ShareGPT-driven rows with measured mean lengths (`mean_measured`) are reproduced with every request
  at the mean lengths (validate.py), a stated assumption.
The model is built from the row's own architecture columns (its public config); the FFN is SwiGLU
unless the notes say non-gated GELU (GPT-J, Falcon), and MoE shape comes from the notes
("MoE 8 experts top-2").
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import re
from pathlib import Path

from distscope.errors import DistscopeError
from distscope.serve.precision import ServePrecision, parse_dtype
from distscope.system.device import get_device
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster
from distscope.userfile import read_text
from distscope.workload.spec import FfnKind, ModelSpec, MoESpec, NormKind, PositionKind

METRICS = ("throughput_out_tok_s", "ttft_s", "tpot_s")
REQUIRED = ("run_id", "source_id", "framework", "model", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
            "gpu", "num_gpus", "tp", "pp", "weight_dtype", "act_dtype", "kv_dtype", "scenario", "batch_or_concurrency",
            "input_len", "output_len", *METRICS)


class Scenario(enum.Enum):
    STATIC = "offline_static_batch"
    SINGLE = "single_request_latency"
    BURST = "burst"  # fixed_batch_burst(rate=inf): N requests at t = 0 on a continuous-batching server
    OFFLINE = "offline_max_throughput"  # N requests at t = 0, throughput only
    POISSON = "poisson"
    CONCURRENCY = "fixed_concurrency"


class Stat(enum.Enum):
    MEAN = "mean"
    MEDIAN = "median"


# device key and cluster preset per GPU family named in the CSV (first match wins)
GPU_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("a100-sxm-40", "a100-sxm4-40gb", "dgx-a100"), ("a100-40", "a100-sxm4-40gb", "dgx-a100"),
    ("a100", "a100-sxm4-80gb", "dgx-a100"), ("h100-pcie", "h100-pcie-80gb", "l40s-pcie"), ("h100", "h100-sxm5-80gb", "dgx-h100"),
    ("h800", "h800-sxm5-80gb", "dgx-h100"), ("h200", "h200-sxm-141gb", "dgx-h200"), ("gh200", "h200-sxm-141gb", "dgx-h200"),
    ("b200", "b200-sxm-180gb", "dgx-b200"), ("l40s", "l40s-48gb", "l40s-pcie"), ("mi300x", "mi300x", "mi300x-oam"),
    ("mi250", "mi250x-gcd", "frontier"), ("v100", "v100-sxm2-32gb", "dgx-a100"),
)


def cluster_for_gpu(gpu: str, num_gpus: int) -> Cluster:
    g = gpu.strip().lower()
    for key, device, preset in GPU_FAMILIES:
        if g.startswith(key):
            c = get_cluster(preset, max(num_gpus, 1))
            return dataclasses.replace(c, device=get_device(device)) if c.device.name != device else c
    raise DistscopeError(f"gpu={gpu!r} is not a known device family; known: {', '.join(k for k, _, _ in GPU_FAMILIES)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServingRow:
    run_id: str
    source_id: str
    framework: str
    spec: ModelSpec
    gpu: str
    num_gpus: int
    tp: int
    pp: int
    ep: int
    prec: ServePrecision
    scenario: Scenario
    load: float  # batch, concurrency, request count or rate, per scenario
    requests: int  # requests the benchmark sent (0 = not stated)
    input_len: float | None
    output_len: float | None
    variable_lengths: bool
    measured: dict[str, float]
    stat: Stat
    tpot_is_itl: bool
    skip: dict[str, str]  # metric -> reason


def _num(r: dict[str, str], col: str, run: str, kind: type = float) -> float | None:
    v = (r.get(col) or "").strip()
    if not v:
        return None
    try:
        return float(kind(float(v)))
    except ValueError:
        raise DistscopeError(f"run {run}: {col}={v!r} is not a number") from None


def _int(r: dict[str, str], col: str, run: str) -> int:
    v = _num(r, col, run)
    if v is None or v != int(v):
        raise DistscopeError(f"run {run}: {col}={r.get(col)!r} must be an integer")
    return int(v)


def _scenario(text: str, run: str) -> Scenario:
    t = text.strip().lower()
    if t.startswith("offline_static"):
        return Scenario.STATIC
    if t.startswith("single_request"):
        return Scenario.SINGLE
    if "burst" in t:
        return Scenario.BURST
    if t.startswith("offline_max"):
        return Scenario.OFFLINE
    if t.startswith("poisson"):
        return Scenario.POISSON
    if "concurrency" in t:
        return Scenario.CONCURRENCY
    raise DistscopeError(f"run {run}: scenario={text!r} is not one of {', '.join(s.value for s in Scenario)}")


def _spec(r: dict[str, str], run: str) -> ModelSpec:
    notes = (r.get("notes") or "").lower()
    name = r["model"].strip()
    gelu = "non-gated gelu" in notes or any(k in name.lower() for k in ("gpt-j", "falcon", "gpt-3", "opt-", "bloom"))
    moe = None
    m = re.search(r"moe\s+(\d+)\s+experts\s+top-(\d+)", notes)
    if m:
        moe = MoESpec(experts=int(m.group(1)), top_k=int(m.group(2)), expert_ffn_hidden=_int(r, "ffn_hidden", run))
    return ModelSpec(
        name=name, layers=_int(r, "layers", run), hidden=_int(r, "hidden", run), heads=_int(r, "heads", run),
        kv_heads=_int(r, "kv_heads", run), ffn_hidden=_int(r, "ffn_hidden", run), vocab=_int(r, "vocab", run),
        ffn=FfnKind.GELU if gelu else FfnKind.SWIGLU, position=PositionKind.ROPE,
        norm=NormKind.LAYERNORM if gelu else NormKind.RMSNORM, bias=gelu, moe=moe,
    )


def parse_row(r: dict[str, str]) -> ServingRow:
    run = (r.get("run_id") or "?").strip()
    for col in REQUIRED:
        if col not in r:
            raise DistscopeError(f"run {run}: missing column {col}")
    scen = _scenario(r["scenario"], run)
    load_txt = r["batch_or_concurrency"].strip().lower()
    m = re.search(r"[\d.]+", load_txt)
    if not m:
        raise DistscopeError(f"run {run}: batch_or_concurrency={r['batch_or_concurrency']!r} is not a number")
    load = float(m.group(0))
    if scen is Scenario.POISSON:
        rm = re.search(r"=\s*([\d.]+)", r["scenario"])
        load = float(rm.group(1)) if rm else load
    notes = r.get("notes") or ""
    nm = re.search(r"(\d+)\s+prompts", notes)
    requests = int(nm.group(1)) if nm else (int(load) if scen in (Scenario.BURST, Scenario.OFFLINE) else 0)
    measured = {k: v for k in METRICS if (v := _num(r, k, run)) is not None}
    if not measured:
        raise DistscopeError(f"run {run}: no measured {', '.join(METRICS)}")
    inp, out = _num(r, "input_len", run), _num(r, "output_len", run)
    quality = (r.get("len_quality") or "exact").strip().lower()
    defs = (r.get("metric_defs") or "").lower()
    skip: dict[str, str] = {}
    if inp is None or "isl_unknown" in quality:
        for k in measured:
            skip[k] = "input_len unknown (ShareGPT prompts, length not stated)"
        inp = None
    if out is None or "osl_unknown" in quality:
        out = None
        for k in measured:
            if k == "ttft_s" and scen is Scenario.SINGLE:
                continue
            skip.setdefault(k, "output_len unknown (benchmark stopped at EOS; lengths not stated)")
    prec = ServePrecision(weights=parse_dtype(r["weight_dtype"], f"run {run}: weight_dtype"),
                          activations=parse_dtype(r["act_dtype"], f"run {run}: act_dtype"),
                          kv=parse_dtype(r["kv_dtype"], f"run {run}: kv_dtype"))
    ep_v = _num(r, "ep", run)
    return ServingRow(
        run_id=run, source_id=r["source_id"].strip(), framework=r["framework"].strip(), spec=_spec(r, run),
        gpu=r["gpu"].strip(), num_gpus=_int(r, "num_gpus", run), tp=_int(r, "tp", run), pp=_int(r, "pp", run),
        ep=int(ep_v) if ep_v else 1, prec=prec, scenario=scen, load=load, requests=requests, input_len=inp,
        output_len=out, variable_lengths=quality.startswith("mean") or "sharegpt" in notes.lower(),
        measured=measured, stat=Stat.MEDIAN if "median" in defs else Stat.MEAN,
        tpot_is_itl="itl" in defs, skip=skip,
    )


def read_rows(path: str | Path) -> list[ServingRow | DistscopeError]:
    """Every row of the file, parsed, or the error that row raised (so one bad row does not stop the rest)."""
    text = read_text(path, "serving CSV")
    try:
        rows = list(csv.DictReader(text.splitlines()))
    except csv.Error as exc:
        raise DistscopeError(f"serving CSV {str(path)!r}: not CSV ({exc})") from None
    if not rows:
        raise DistscopeError(f"{path}: no rows")
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise DistscopeError(f"{path}: missing column(s) {', '.join(missing)} (see data/validation/README.md)")
    out: list[ServingRow | DistscopeError] = []
    for r in rows:
        try:
            out.append(parse_row(r))
        except DistscopeError as exc:
            out.append(exc)
    return out
