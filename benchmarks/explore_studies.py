"""Re-run the README's two `distscope explore` studies and render their README bullets from the output,
so that every number in those bullets is the studies' output, never typed by hand.

    python benchmarks/explore_studies.py            # re-plan every point of both studies (no resume), write
                                                    # docs/explore/{nvlink_405b,hbm_70b}.json, render the README
    python benchmarks/explore_studies.py --render   # only re-render the README block from the committed JSON
    python benchmarks/explore_studies.py --check    # exit 1 if the README block is stale (a test runs this)
    python benchmarks/explore_studies.py --study hbm_70b [--workers N]   # one study (then the render)

Each study's JSON is exactly what `distscope explore docs/explore/NAME.yaml --out docs/explore/NAME.json
--fresh` writes (the same sweep file, `run_sweep` and output encoder; no resume, so a changed estimator
is re-run, never read back from the old output). Point results do not depend on the engine, the number
of workers or the batching, so the output is deterministic. Progress goes to stderr, one line per
finished batch; the last line of stdout is a JSON object with the wall times.

The README block sits between the `explore-studies` markers; tests/explore/test_studies.py checks it
equals the render of the committed JSON, and that a fresh plan of a few points of each study equals the
committed rows (so a stale study fails CI).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from distscope.explore.formats import Format, json_doc, read_results
from distscope.explore.local import LocalEngine
from distscope.explore.point import PlanSettings, Point, run_batch
from distscope.explore.runner import Results, run_sweep
from distscope.explore.spec_file import load_sweep
from distscope.explore.sweep import Sweep, sweep_json
from distscope.explore.table import build

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "explore"
README = ROOT / "README.md"
STUDIES = ("nvlink_405b", "hbm_70b")  # README order
WIDTH = 110  # README line width of the rendered prose
BEGIN, END = "<!-- explore-studies:begin (benchmarks/explore_studies.py) -->", "<!-- explore-studies:end -->"


def sweep_of(name: str) -> Sweep:
    return load_sweep(DOCS / f"{name}.yaml")


def output_of(name: str) -> dict[str, Any]:
    return dict(json.loads((DOCS / f"{name}.json").read_text()))


class _Progress:
    """An engine that reports each finished batch of the engine it wraps on stderr."""

    def __init__(self, engine: LocalEngine, label: str) -> None:
        self.engine, self.label = engine, label

    @property
    def name(self) -> str:
        return self.engine.name

    def run(self, todo: list[tuple[str, Point]], settings: PlanSettings) -> Iterator[Results]:
        t0, done = time.monotonic(), 0
        print(f"{self.label}: {len(todo)} points on {self.engine.name}", file=sys.stderr, flush=True)
        for batch in self.engine.run(todo, settings):
            done += len(batch)
            el = time.monotonic() - t0
            eta = el / done * (len(todo) - done)
            print(f"{self.label}: {done}/{len(todo)} points, {el:.0f} s, ~{eta:.0f} s left", file=sys.stderr,
                  flush=True)
            yield batch


def run_study(name: str, workers: int = 0) -> float:
    """Plan every point of study `name` afresh and write docs/explore/NAME.json; wall seconds."""
    t0 = time.perf_counter()
    run_sweep(sweep_of(name), _Progress(LocalEngine(workers=workers), name), out=DOCS / f"{name}.json", fresh=True,
              show_progress=False)
    return time.perf_counter() - t0


def fresh_points(name: str, indices: Sequence[int]) -> list[dict[str, Any]]:
    """The output rows (`points` entries) of grid points `indices` of study `name`, planned now, through
    the code a sweep's workers run; the other points' results, which the Pareto flags depend on, are the
    committed ones."""
    sweep = sweep_of(name)
    points = sweep.points()
    results = read_results(DOCS / f"{name}.json", Format.JSON)
    results.update(run_batch([(points[i].key(sweep.plan), points[i]) for i in indices], sweep.plan))
    doc = json_doc(build(sweep, points, results), sweep_json(sweep))
    return [doc["points"][i] for i in indices]


# ---------------------------------------------------------------------------------------------- rendering
# Names and facts the prose uses that are not in the output: display names, and the H200 the price model
# is compared with (141 GB = 131.3 GiB, 4,800 GB/s: NVIDIA's H200 datasheet).
MODEL_NAMES = {"llama3.1-405b": "Llama 3.1 405B", "llama3-70b": "Llama 3 70B"}
DEVICE_NAMES = {"h100-sxm5-80gb": "H100"}
H200_GiB, H200_GBps = 141e9 / 2**30, 4800.0
SECOND_BUDGET = 1e6  # the hbm_70b study's second budget (its sweep file: `--budget 1e6`)
MEAGER_PCT = 1.0  # "buys almost nothing": less than this % less time


class ClaimError(Exception):
    """A sentence of the README's interpretive prose no longer holds for the output: edit the prose here."""


def _claim(ok: bool, what: str) -> None:
    if not ok:
        raise ClaimError(f"the README says {what!r}, which the study output no longer supports: "
                         "edit that sentence in benchmarks/explore_studies.py")


def _money(x: float) -> str:
    return f"{x / 1e3:.0f}k" if x < 999.5e3 else f"{x / 1e6:.2f}M"


def _round_money(x: float) -> str:
    """A budget: 600k, 1M."""
    return f"{x / 1e3:g}k" if x < 1e6 else f"{x / 1e6:g}M"


def _tokens(x: float) -> str:
    for unit, name in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if x >= unit:
            return f"{x / unit:g}{name}"
    return f"{x:g}"


def _range(lo: float, hi: float, fmt: str) -> str:
    a, b = format(lo, fmt), format(hi, fmt)
    return a if a == b else f"{a}-{b}"


def _a(n: int) -> str:
    """The article before a number read aloud: an 8, an 18, an 80, a 16."""
    return "an" if str(n).startswith("8") or str(n) in ("11", "18") else "a"


def _layout(p: dict[str, Any]) -> str:
    """tp4·pp16×7·cp8·dp36 (degrees of 1 left out, except dp)."""
    s = f"tp{p['tp']}" if p["tp"] > 1 else ""
    if p["pp"] > 1:
        s += f"·pp{p['pp']}" + (f"×{p['vp']}" if p["vp"] > 1 else "")
    for k in ("cp", "ep"):
        if p[k] > 1:
            s += f"·{k}{p[k]}"
    return (s + f"·dp{p['dp']}").lstrip("·")


def _compressed(p: dict[str, Any]) -> bool:
    return bool(p["compression"]) and p["compression"] != "none"


def _plan(p: dict[str, Any]) -> str:
    return _layout(p) + (f" with `{p['compression']}`" if _compressed(p) else "")


def _plan_long(p: dict[str, Any]) -> str:
    zero = 1 if p["distributed_optimizer"] and p["zero_stage"] == 0 else p["zero_stage"]
    rc = "no recompute" if p["recompute"] == "none" else f"{p['recompute']} recompute"
    return f"{_plan(p)}, micro-batch {p['micro_batch']}, ZeRO-{zero}, {rc}"


def _ok_rows(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    bad = [r["index"] for r in doc["points"] if r["status"] != "ok"]
    if bad:
        raise ClaimError(f"{name}: points {bad} cannot be planned; the README's tables assume every point can")
    return list(doc["points"])


def _preset(doc: dict[str, Any]) -> dict[str, float]:
    from distscope.dtypes import Precision
    from distscope.explore.hardware import resolved
    from distscope.system.presets import get_cluster

    sw = doc["sweep"]
    return resolved(get_cluster(sw["base"]["cluster"], 1), Precision.parse(sw["plan"]["precision"]).gemm_dtype)


def _bullet(*paragraphs: str) -> list[str]:
    """A README list item: paragraphs wrapped at WIDTH, continuation lines indented by two spaces; a
    paragraph starting with '|' is a table, kept as it is."""
    out: list[str] = []
    for i, para in enumerate(paragraphs):
        if i:
            out.append("")
        if para.startswith("|"):
            out.extend(f"  {line}" for line in para.splitlines())
        else:
            out.extend(textwrap.wrap(para, WIDTH, initial_indent="- " if i == 0 else "  ", subsequent_indent="  ",
                                     break_long_words=False, break_on_hyphens=False))
    return out


def render_nvlink(doc: dict[str, Any]) -> list[str]:
    rows = _ok_rows(doc, "nvlink_405b")
    sw = doc["sweep"]
    model = MODEL_NAMES[sw["base"]["model"]]
    gpus, bws, sizes = (sorted({r[k] for r in rows}) for k in ("gpus", "nvlink_GBps", "nvlink_size"))
    at = {(r["gpus"], r["nvlink_GBps"], r["nvlink_size"]): r for r in rows}
    d0, d1, big = sizes[0], sizes[-1], gpus[-1]
    (nic,) = {r["nic_GBps"] for r in rows}
    (device,) = {DEVICE_NAMES[r["device"]] for r in rows}
    gains = {(g, bw): 100 * (1 - at[(g, bw, d1)]["step_time_s"] / at[(g, bw, d0)]["step_time_s"])
             for g in gpus for bw in bws}
    lo, hi = min(gains.values()), max(gains.values())
    best_gain = {g: max(gains[(g, bw)] for bw in bws) for g in gpus}
    _claim(lo >= 0 and hi < 10, "the bigger domain buys little: ...% less step time")
    _claim(best_gain[big] > best_gain[gpus[0]], "the gain grows as GPUs get fewer tokens each")
    tp_small = max(at[(g, bw, d0)]["best_plan"]["tp"] for g in gpus for bw in bws)
    _claim(tp_small <= d0, f"TP ≤ {tp_small} inside the node")
    kinds = sorted({r["best_plan"]["compression"] for r in rows if _compressed(r["best_plan"])})
    comp = {(g, bw): [s for s in sizes if _compressed(at[(g, bw, s)]["best_plan"])] for g in gpus for bw in bws}
    if kinds:
        _claim(all(not c or c[0] == d0 for c in comp.values()), "compression pays less as the domain grows")

    def cell(r: dict[str, Any]) -> str:
        return f"{r['step_time_s']:.3f}" + ("\\*" if _compressed(r["best_plan"]) else "")

    table = [f"| GPUs | NVLink GB/s | domain {d0} | " + " | ".join(map(str, sizes[1:])) + f" | {d0} → {d1} |",
             "|" + "---|" * (len(sizes) + 3)]
    table += [f"| {g:,} | {bw:g} | " + " | ".join(cell(at[(g, bw, s)]) for s in sizes) + f" | −{gains[(g, bw)]:.1f}% |"
              for g in gpus for bw in bws]
    layouts = {g: sorted({_layout(at[(g, bw, s)]["best_plan"]) for bw in bws for s in sizes}) for g in gpus}
    if all(len(v) == 1 for v in layouts.values()):
        layout = ("while the best layout stays the same at every domain size ("
                  + ", ".join(f"{v[0]} on {g:,} GPUs" for g, v in layouts.items()) + ")")
    else:
        layout = ("and the best layout changes (" + "; ".join(
            f"{g:,} GPUs at {bws[-1]:g} GB/s: {_plan(at[(g, bws[-1], d0)]['best_plan'])} → "
            f"{_plan(at[(g, bws[-1], d1)]['best_plan'])}" for g in gpus) + ")")
    gh = "; ".join(f"{at[(g, bws[-1], d0)]['gpu_hours'] / 1e6:.3f} → {at[(g, bws[-1], d1)]['gpu_hours'] / 1e6:.3f} M"
                   + (" GPU-hours" if i == 0 else "") + f" at {g:,} GPUs" for i, g in enumerate(gpus))
    mfu = [r["mfu"] * 100 for r in rows]
    star = (f" (\\*: the best plan quantizes communication: {' or '.join(f'`{k}`' for k in kinds)})" if kinds
            else "")
    weights = sum("weights" in k for k in kinds)
    quantized = "DP gradients" + (" and weights" if weights == len(kinds) else " (and weights)" if weights else "")
    return _bullet(
        f"*{model} as the NVLink domain grows from {d0} to {d1} GPUs (NVL{d1} class)*, {device} compute, {nic:g} "
        f"GB/s NIC per GPU, global batch {sw['base']['global_batch']:,} × {sw['base']['seq']:,} tokens, "
        f"{_tokens(sw['objectives']['train_tokens'])} tokens (`distscope explore docs/explore/nvlink_405b.yaml "
        f"--out docs/explore/nvlink_405b.json`). Best-plan step time in seconds{star}:",
        "\n".join(table),
        f"For a dense {model.split()[-1]} model the bigger domain buys little: {_range(lo, hi, '.1f')}% less step "
        f"time, so at the same GPU count and the same price per GPU-hour, {_range(lo, hi, '.1f')}% fewer GPU-hours "
        f"({gh}, at {bws[-1]:g} GB/s). That is also the most an NVL{d1}-class GPU-hour could cost above {_a(d0)} "
        f"{d0}-GPU-domain one and still break even. Why: with {d0}-GPU domains the planner already hides most "
        f"communication (TP ≤ {tp_small} inside the node, CP and PP across nodes, DP overlapped"
        + (f", and quantized {quantized} where that pays" if kinds else "")
        + "); a larger domain puts more of the CP and DP traffic on NVLink"
        + (", which makes compression pay less (the \\* cells)" if kinds else "")
        + f", {layout}. The gain grows as GPUs get fewer tokens each (at most {best_gain[gpus[0]]:.1f}% at "
        f"{gpus[0]:,} GPUs, {best_gain[big]:.1f}% at {big:,}). The model's caveats apply: it assumes the overlap "
        f"Megatron-Core achieves, and it predicts ~{_range(min(mfu), max(mfu), '.0f')}% MFU where Meta reported "
        f"38-43% for the real {model.split()[-1]} run, so the absolute times are optimistic; the domain-size trend "
        "is the answer.",
    )


def render_hbm(doc: dict[str, Any]) -> list[str]:
    rows = _ok_rows(doc, "hbm_70b")
    sw, best = doc["sweep"], doc["best"]
    obj, price = sw["objectives"], sw["objectives"]["price"]
    model = MODEL_NAMES[sw["base"]["model"]]
    (device,) = {DEVICE_NAMES[r["device"]] for r in rows}
    gpus, caps, bws = (sorted({r[k] for r in rows}) for k in ("gpus", "hbm_GiB", "hbm_GBps"))
    at = {(r["gpus"], r["hbm_GiB"], r["hbm_GBps"]): r for r in rows}
    preset = _preset(doc)
    cap0, bw0 = preset["hbm_GiB"], preset["hbm_GBps"]
    _claim(cap0 in caps and bw0 in bws, f"plain {device}s ({cap0:g} GiB, {bw0:g} GB/s) are a point of the grid")
    _claim(set(price["per_unit"]) == {"hbm_GiB", "hbm_GBps"}, "the price model: per GiB and per GB/s")
    k_cap, k_bw = price["per_unit"]["hbm_GiB"], price["per_unit"]["hbm_GBps"]
    h200 = price["per_gpu_hour"] + k_cap * (H200_GiB - cap0) + k_bw * (H200_GBps - bw0)
    days = {i: r["time_to_train_s"] / 86400 for i, r in enumerate(rows)}

    def where(r: dict[str, Any]) -> str:
        return f"{r['gpus']:,} GPUs with {r['hbm_GiB']:g} GiB at {r['hbm_GBps']:,.0f} GB/s"

    def fastest_within(budget: float) -> dict[str, Any] | None:
        within = [r for r in rows if r["cost"] <= budget]
        return min(within, key=lambda r: (r["time_to_train_s"], r["index"])) if within else None

    # the budget pick (the output's own `best`, re-derived for the second budget)
    budget = obj["budget"]
    pick = rows[best["fastest_within_budget"]]
    _claim(fastest_within(budget) is pick, "the fastest point within the budget")
    plain = at[(pick["gpus"], cap0, bw0)]
    faster = [r for r in rows if r["time_to_train_s"] < pick["time_to_train_s"]]
    if pick is plain:
        head = (f"the fastest point is **{pick['gpus']:,} plain {device}s**: {days[pick['index']]:.2f} days, "
                f"{_money(pick['cost'])} ({_plan_long(pick['best_plan'])})")
    else:
        head = (f"the fastest point is **{where(pick)}**: {days[pick['index']]:.2f} days, {_money(pick['cost'])} "
                f"({_plan_long(pick['best_plan'])}), vs {days[plain['index']]:.2f} days for plain {device}s "
                f"({_plan(plain['best_plan'])})")
    if faster:
        f = min(faster, key=lambda r: (r["cost"], r["index"]))
        head += (f"; every faster point is over the budget, the cheapest being {where(f)}: "
                 f"{days[f['index']]:.2f} days for {_money(f['cost'])}")
    pick2 = fastest_within(SECOND_BUDGET)
    second = (f"With a budget of {_round_money(SECOND_BUDGET)} (`--budget {SECOND_BUDGET:.0e}`, re-ranked from the stored "
              "points) it is " + (f"{where(pick2)}: {days[pick2['index']]:.2f} days for {_money(pick2['cost'])}."
                                  if pick2 is not None else "none."))
    second = second.replace("e+0", "e")

    def pct_less(a: dict[str, Any], b: dict[str, Any]) -> float:  # % less step time of b than a
        return 100 * (1 - b["step_time_s"] / a["step_time_s"])

    bw_gain = [pct_less(at[(g, c, bws[0])], at[(g, c, bws[-1])]) for g in gpus for c in caps]
    bw_gain0 = [pct_less(at[(g, c, bw0)], at[(g, c, min(b for b in bws if b > bw0))]) for g in gpus for c in caps]
    bw_next = min(b for b in bws if b > bw0)
    mid_caps = [c for c in caps if cap0 < c < caps[-1]]
    cap_mid = max(pct_less(at[(g, cap0, b)], at[(g, c, b)]) for g in gpus for c in mid_caps for b in bws)
    cap_top = max(pct_less(at[(g, cap0, b)], at[(g, caps[-1], b)]) for g in gpus for b in bws)
    rise = 100 * (at[(gpus[0], cap0, bws[-1])]["price_per_gpu_hour"] / at[(gpus[0], cap0, bws[0])]["price_per_gpu_hour"]
                  - 1)
    _claim(min(bw_gain) > 0, "bandwidth buys ...% per step")
    g_tab = pick["gpus"]
    marks = {pick["index"]: "**"} | ({pick2["index"]: "**"} if pick2 is not None else {})
    table = ["| HBM GiB \\ GB/s | " + " | ".join(f"{b:,.0f}" for b in bws) + " |", "|" + "---|" * (len(bws) + 1)]
    for c in caps:
        cells = []
        for b in bws:
            r = at[(g_tab, c, b)]
            m = marks.get(r["index"], "")
            cells.append(f"{m}{days[r['index']]:.2f} d, {_money(r['cost'])}{m}")
        table.append(f"| {c:g} | " + " | ".join(cells) + " |")
    return _bullet(
        f"*Best HBM capacity / bandwidth for a {model.split()[-1]} model under a fixed budget*: {model}, "
        f"{_tokens(obj['train_tokens'])} tokens, global batch {sw['base']['global_batch']:,} × "
        f"{sw['base']['seq']:,}, {'/'.join(f'{g:,}' for g in gpus)} GPUs × HBM {caps[0]:g}-{caps[-1]:g} GiB × "
        f"{bws[0]:,.0f}-{bws[-1]:,.0f} GB/s (`distscope explore docs/explore/hbm_70b.yaml --out "
        f"docs/explore/hbm_70b.json`). **Price model, an assumption, not a quote:** {price['per_gpu_hour']:.2f} per "
        f"GPU-hour for an {device} ({cap0:g} GiB, {bw0:,.0f} GB/s), + {k_cap:g} per GiB and + {k_bw:g} per GB/s "
        f"above that (≈ {h200:.2f} for an H200-like {H200_GiB:.0f} GiB / {H200_GBps:,.0f} GB/s part, about the gap "
        f"between their rental prices). Days to train and cost on {g_tab:,} GPUs (bold: the budget picks below):",
        "\n".join(table),
        f"Under a budget of {_round_money(budget)} (plain {device}s cost "
        + ", ".join(_money(at[(g, cap0, bw0)]["cost"]) for g in gpus[:-1]) + f" and "
        f"{_money(at[(gpus[-1], cap0, bw0)]['cost'])} on {', '.join(f'{g:,}' for g in gpus[:-1])} and {gpus[-1]:,} "
        f"GPUs) {head}. {second} Capacity above {cap0:g} GiB buys at most {cap_mid:.1f}% per step up to "
        f"{mid_caps[-1]:g} GiB and {cap_top:.1f}% at {caps[-1]:g} GiB (same GPUs and bandwidth); bandwidth buys "
        f"{_range(min(bw_gain), max(bw_gain), '.0f')}% per step from {bws[0]:,.0f} to {bws[-1]:,.0f} GB/s "
        f"({_range(min(bw_gain0), max(bw_gain0), '.1f')}% from {bw0:,.0f} to {bw_next:,.0f}), while under this price "
        f"model a GPU-hour at {bws[-1]:,.0f} GB/s costs {rise:.0f}% more than at {bws[0]:,.0f} (with {cap0:g} GiB).",
    )


def render(docs: dict[str, dict[str, Any]]) -> str:
    """The README block, markers included."""
    return "\n".join([BEGIN, *render_nvlink(docs["nvlink_405b"]), *render_hbm(docs["hbm_70b"]), END])


def readme_block(text: str) -> tuple[int, int]:
    """(start, end) of the marked block in the README text, markers included."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    return start, end + len(END)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--render", action="store_true", help="only re-render the README block from the committed JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 if the README block differs from the render")
    ap.add_argument("--study", choices=STUDIES, action="append", help="re-run only this study (repeatable)")
    ap.add_argument("--workers", type=int, default=0, help="local worker processes (0 = one per core)")
    args = ap.parse_args(argv)
    walls: dict[str, float] = {}
    if not (args.render or args.check):
        for name in args.study or STUDIES:
            walls[name] = round(run_study(name, args.workers), 1)
            print(f"{name}: wrote {DOCS / (name + '.json')} in {walls[name]:.1f} s", file=sys.stderr, flush=True)
    block = render({name: output_of(name) for name in STUDIES})
    text = README.read_text()
    start, end = readme_block(text)
    if args.check:
        if text[start:end] != block:
            print("README.md's explore-studies block is stale: run python benchmarks/explore_studies.py --render",
                  file=sys.stderr)
            return 1
        return 0
    if text[start:end] != block:
        README.write_text(text[:start] + block + text[end:])
        print("README.md: explore-studies block rewritten", file=sys.stderr)
    print(json.dumps({"wall_s": walls, "total_s": round(sum(walls.values()), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
