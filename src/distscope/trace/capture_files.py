"""A capture folder: per-rank host/Kineto traces in, linked ET+ and Chakra ET out (torch-free).

    DIR/host.<r>.json     PyTorch execution trace (input)
    DIR/kineto.<r>.json   Kineto trace (input)
    DIR/meta.<r>.json     measured step time, torch version, world size, profiler cost (input)
    DIR/steps.<r>.json    every step's time without the profiler (input; trace/recorder.py)
    DIR/calls/*.json      comm log of every rank (input; merged into DIR/calls.json)
    DIR/linked.<r>.json   ET+ (trace/link.py): what `chakra_converter PyTorch` reads
    DIR/step.<r>.et       Chakra ET written by distscope: leaf ops on thread lanes, Python time, COMM
                          nodes with comm_size and process group, waits as dependencies (from_capture.py)
    DIR/chakra/step.<r>.et  the same step converted by mlc-chakra's own PyTorchConverter (when installed);
                          host ops only, gloo collectives as the ops that ran them, no COMM nodes
    DIR/capture.json      summary: measured step per rank, nodes, bytes per group
    DIR/profiled/<k>/     host, Kineto and meta files of the k-th of several profiled steps (input); the
                          median one is moved up into DIR (choose_profiled_step) and the folder removed
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.trace.from_capture import CapturedRank, build_rank
from distscope.trace.link import link
from distscope.trace.profiler_cost import ProfilerCost
from distscope.userfile import read_json, write_text

PREFIX = "step"
SUMMARY = "capture.json"
SUMMARY_FORMAT = "distscope-capture/1"
CONVERTED = "chakra"
# Files a capture writes; cleared before a new capture into the same folder (stale ranks never mix).
OWN_PATTERNS = ("host.*.json", "kineto.*.json", "meta.*.json", "steps.*.json", "linked.*.json", f"{PREFIX}.*.et", SUMMARY,
                "calls.json", "calls/*.json", f"{CONVERTED}/{PREFIX}.*.et", "profiled.json")


def tries_dir(out_dir: Path) -> Path:
    """Where a capture of several profiled steps writes each one's files: tries_dir/<k>/."""
    return out_dir / "profiled"


def clear(out_dir: Path) -> None:
    for pattern in OWN_PATTERNS:
        for p in out_dir.glob(pattern):
            p.unlink()
    shutil.rmtree(tries_dir(out_dir), ignore_errors=True)


def choose_profiled_step(out_dir: Path) -> None:
    """Of several profiled steps (tries_dir), keep the median one: its files move up into `out_dir`.
    Each is a sample of the same step, and the replay is of one of them: a host disturbance during one
    step (on a 2-core host with 4 ranks, two ranks' profiled step ran 310-318 ms against 225-243 ms
    in the step of a repeated capture) would be replayed in full. A step's time is its slowest rank's
    profiled time; with an even count the faster of the two middle ones is kept. Steps that some rank
    did not finish are left out (if every step misses a rank, the one most ranks finished is kept, for
    the error that follows). Their times and the kept step go to DIR/profiled.json; nothing to do when
    the capture profiled one step."""
    root = tries_dir(out_dir)
    tries = sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)) if root.is_dir() else []
    if not tries:
        return
    times: dict[Path, float] = {}
    for t in tries:
        ranks = ranks_with_traces(t)
        metas = [read_meta(t, r) for r in ranks]
        if metas and len(ranks) == int(metas[0]["world_size"]):
            times[t] = max(float(m["step_s"]) for m in metas)
    order = sorted(times, key=lambda t: times[t])
    kept = order[(len(order) - 1) // 2] if order else max(tries, key=lambda t: len(ranks_with_traces(t)))
    for f in kept.iterdir():
        f.replace(out_dir / f.name)
    info = {"profiled_steps_s": [times.get(t) for t in tries], "kept": tries.index(kept)}
    write_text(out_dir / "profiled.json", json.dumps(info) + "\n", "profiled steps")
    shutil.rmtree(root)


def _file_ranks(out_dir: Path, kind: str) -> list[int]:
    """The ranks r with an `out_dir`/<kind>.<r>.json."""
    return sorted(int(r) for p in out_dir.glob(f"{kind}.*.json") if (r := p.name.split(".")[1]).isdigit())


def ranks_with_traces(out_dir: Path) -> list[int]:
    """Ranks whose host, Kineto and meta files are all present."""
    return [r for r in _file_ranks(out_dir, "meta")
            if (out_dir / f"host.{r}.json").is_file() and (out_dir / f"kineto.{r}.json").is_file()]


def ranks_that_exited(out_dir: Path) -> list[int]:
    """Ranks that left through the interpreter's exit (their steps.<r>.json is written at exit, even with no
    step timed): a rank killed by a signal, or crashed in native code, leaves none."""
    return _file_ranks(out_dir, "steps")


def postprocess_rank(out_dir: Path, rank: int, *, convert: bool = True,
                     first_done: dict[tuple[str, int], tuple[float, float]] | None = None,
                     cost: ProfilerCost | None = None) -> CapturedRank:
    """Link, build and write one rank's Chakra ET (and mlc-chakra's conversion when `convert`);
    `first_done`: the rank's collectives' wall-clock issue and group-first completion (first_completions)."""
    from distscope.trace.chakra_io import write_rank

    host_path, kineto_path = out_dir / f"host.{rank}.json", out_dir / f"kineto.{rank}.json"
    et_plus = link(read_json(host_path, "host trace"), read_json(kineto_path, "Kineto trace"),
                   host_where=repr(str(host_path)), kineto_where=repr(str(kineto_path)))
    linked_path = out_dir / f"linked.{rank}.json"
    write_text(linked_path, json.dumps(et_plus), "linked trace")
    captured = build_rank(et_plus, rank, f"trace {str(linked_path)!r}", completion_s=completions(out_dir, rank),
                          first_done=first_done, cost=cost)
    write_rank(out_dir / f"{PREFIX}.{rank}.et", captured.graph, captured.groups, captured.labels)
    if convert:
        convert_with_chakra(linked_path, out_dir / CONVERTED / f"{PREFIX}.{rank}.et")
    return captured


def completions(out_dir: Path, rank: int) -> dict[tuple[str, int], float]:
    """Issue-to-completion seconds of each comm call of a rank, by (group, seq), from its comm log."""
    out: dict[tuple[str, int], float] = {}
    for p in sorted((out_dir / "calls").glob(f"rank{rank}.*.json")):
        for c in read_json(p, "log file").get("calls", []):
            if c.get("duration_s") is not None and c.get("rank") == rank:
                out[(str(c["group"]), int(c["seq"]))] = float(c["duration_s"])
    return out


def first_completions(out_dir: Path, hosts: dict[int, str]) -> dict[int, dict[tuple[str, int], tuple[float, float]]]:
    """Per rank, by (group, seq): (this rank's issue, when the call was done everywhere it matters),
    wall-clock seconds from the comm logs (start_s, start_s + duration_s). A collective completes on
    every member within one message of the last arrival, so its first completion on any member is when
    it was done. A p2p pair, the k-th send from a to b with the k-th recv at b from a on one group (logs
    that name the peer): the send is done at its own completion; the recv once it was posted and the
    send was done (or at its own completion, if earlier). Only calls whose ranks all logged them and ran
    on one host (`hosts`, from the meta files: their clocks agree)."""
    done: dict[tuple[str, int], dict[int, tuple[float, float]]] = defaultdict(dict)
    members: dict[tuple[str, int], tuple[int, ...]] = {}
    p2p: dict[tuple[str, int, int, str], list[tuple[int, int, float, float]]] = defaultdict(list)
    for p in sorted((out_dir / "calls").glob("rank*.json")):
        for c in read_json(p, "log file").get("calls", []):
            if c.get("duration_s") is None or c.get("error"):
                continue
            rank, start = int(c["rank"]), float(c["start_s"])
            span = (start, start + float(c["duration_s"]))
            if c.get("op") in ("send", "recv"):
                if isinstance(c.get("peer"), int):
                    src, dst = (rank, c["peer"]) if c["op"] == "send" else (c["peer"], rank)
                    p2p[(str(c["group"]), src, dst, c["op"])].append((rank, int(c["seq"]), *span))
                continue
            key = (str(c["group"]), int(c["seq"]))
            done[key][rank] = span
            members[key] = tuple(int(r) for r in c.get("group_ranks") or ())
    out: dict[int, dict[tuple[str, int], tuple[float, float]]] = defaultdict(dict)
    for key, by_rank in done.items():
        ranks = members[key]
        if not ranks or set(by_rank) != set(ranks) or not _one_host(ranks, hosts):
            continue
        first = min(t for _, t in by_rank.values())
        for r, (issued, _) in by_rank.items():
            out[r][key] = (issued, first)
    for (group, src, dst, op), sends in p2p.items():
        if op != "send" or not _one_host((src, dst), hosts):
            continue
        recvs = sorted(p2p.get((group, src, dst, "recv"), []), key=lambda x: x[2])
        for (s_rank, s_seq, s_issue, s_end), (r_rank, r_seq, r_issue, r_end) in zip(
                sorted(sends, key=lambda x: x[2]), recvs, strict=False):
            out[s_rank][(group, s_seq)] = (s_issue, s_end)
            out[r_rank][(group, r_seq)] = (r_issue, min(r_end, max(r_issue, s_end)))
    return out


def _one_host(ranks: tuple[int, ...], hosts: dict[int, str]) -> bool:
    return all(r in hosts for r in ranks) and len({hosts[r] for r in ranks}) == 1


def convert_with_chakra(linked_path: Path, out_path: Path) -> bool:
    """Run mlc-chakra's PyTorchConverter on ET+ JSON; False when mlc-chakra is not installed."""
    try:
        from chakra.src.converter.pytorch_converter import PyTorchConverter
    except ImportError:
        return False
    import logging

    out_path.parent.mkdir(parents=True, exist_ok=True)
    level = logging.root.level
    logging.root.setLevel(logging.WARNING)  # the converter logs every node at DEBUG/INFO
    try:
        PyTorchConverter().convert(str(linked_path), str(out_path), False)
    except Exception as exc:  # the converter raises bare Exception/ValueError/KeyError on bad input
        raise DistscopeError(f"chakra_converter on {str(linked_path)!r}: {type(exc).__name__}: {exc}"[:400]) from exc
    finally:
        logging.root.setLevel(level)
    return True


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaptureSummary:
    world_size: int
    step: int | None
    torch: str
    step_s_by_rank: dict[int, float]
    # when each rank's step began after the first rank's (ranks of one host: one Kineto clock), else empty
    start_offset_s_by_rank: dict[int, float]
    nodes: int
    comm_bytes_by_group: dict[str, dict[str, int]]  # group -> {op: bytes per rank, summed over ranks}
    converted: bool
    # the job's own steps, timed without the profiler (steps.<r>.json): the step time over ranks (the
    # slowest rank's interval) of each timed step; empty for a capture made before they were recorded
    unprofiled_steps_s: tuple[float, ...] = ()
    unprofiled_by_rank: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)
    # of several profiled steps (choose_profiled_step): each one's slowest rank's time (None: a rank did
    # not finish it), in order; the replayed one is `step`
    profiled_steps_s: tuple[float | None, ...] = ()

    @property
    def step_s(self) -> float:
        """The measured step: from the first rank's start to the last rank's end (optimizer.step()
        returned), as the simulated step runs. recorder.py meets the ranks in the c10d store first, yet
        on a loaded host they still start tens of ms apart; where their clocks cannot be compared
        (several hosts), the longest rank's own step."""
        off = self.start_offset_s_by_rank
        return max(off.get(r, 0.0) + s for r, s in self.step_s_by_rank.items())

    @property
    def unprofiled_step_s(self) -> float | None:
        """The job's own step: the median over timed steps of the slowest rank's interval."""
        return statistics.median(self.unprofiled_steps_s) if self.unprofiled_steps_s else None

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["format"] = SUMMARY_FORMAT
        d["prefix"] = PREFIX
        d["step_s"] = self.step_s
        d["unprofiled_step_s"] = self.unprofiled_step_s
        return d


def unprofiled_steps(out_dir: Path, world: int) -> tuple[tuple[float, ...], dict[int, dict[str, float]]]:
    """From steps.<r>.json: per timed step the slowest rank's interval (steps every rank timed), and per
    rank the median, min, max and count of its own timed intervals. Warm-up intervals, the profiled
    one and the one during which the profiler started are left out."""
    per_rank: dict[int, dict[int, float]] = {}
    for r in range(world):
        p = out_dir / f"steps.{r}.json"
        if not p.is_file():
            return (), {}
        data = read_json(p, "step timings")
        times, warmup, profiled = data.get("step_s"), data.get("warmup", 0), data.get("profiled")
        if not isinstance(times, list) or not isinstance(warmup, int):
            raise DistscopeError(f"step timings {str(p)!r}: field step_s must be a list and warmup an integer")
        skip = set(profiled) if isinstance(profiled, list) else {profiled}  # one int: an older capture
        per_rank[r] = {k: float(t) for k, t in enumerate(times) if k >= max(warmup, 1) and k not in skip}
    common = sorted(set.intersection(*(set(v) for v in per_rank.values()))) if per_rank else []
    steps = tuple(max(per_rank[r][k] for r in per_rank) for k in common)
    stats = {r: {"median_s": statistics.median(v.values()), "min_s": min(v.values()), "max_s": max(v.values()),
                 "steps": len(v)} for r, v in per_rank.items() if v}
    return steps, stats


def read_meta(out_dir: Path, rank: int) -> dict[str, Any]:
    meta: dict[str, Any] = read_json(out_dir / f"meta.{rank}.json", "capture meta")
    for key in ("world_size", "step_s"):
        if key not in meta:
            raise DistscopeError(f"capture meta {str(out_dir / f'meta.{rank}.json')!r}: missing field {key!r}")
    return meta


def postprocess(out_dir: Path, *, convert: bool = True, progress: Any = None) -> CaptureSummary:
    """Every rank of a capture folder (its median profiled step, choose_profiled_step); checks that
    ranks 0..world-1 are all there."""
    choose_profiled_step(out_dir)
    ranks = ranks_with_traces(out_dir)
    if not ranks:
        raise DistscopeError(f"capture folder {str(out_dir)!r}: no rank wrote host/kineto/meta traces")
    metas = {r: read_meta(out_dir, r) for r in ranks}
    world = int(metas[ranks[0]]["world_size"])
    missing = sorted(set(range(world)) - set(ranks))
    if missing:
        raise DistscopeError(
            f"capture folder {str(out_dir)!r}: rank {missing[0]} of {world} wrote no traces "
            f"(files host.{missing[0]}.json/kineto.{missing[0]}.json/meta.{missing[0]}.json); did it reach the step?"
        )
    nodes = 0
    starts: dict[int, float] = {}
    by_group: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    converted = convert
    # gloo only: an NCCL collective's logged completion is when its CUDA work was seen done, not host time
    host_names = {m.get("host") for m in metas.values()}  # one name: one clock for every rank's Kineto trace
    hosts = {r: str(m["host"]) for r, m in metas.items() if m.get("host") and m.get("backend") == "gloo"}
    first = first_completions(out_dir, hosts)
    for r in ranks:
        cap = postprocess_rank(out_dir, r, convert=convert, first_done=first.get(r, {}),
                               cost=ProfilerCost.from_json(metas[r].get("profiler_cost")))
        nodes += len(cap.graph.nodes)
        starts[r] = cap.start_us
        for c in cap.calls:
            by_group[c.label or c.group][c.op.value] += c.bytes
        if progress is not None:
            progress()
    if convert:
        converted = all((out_dir / CONVERTED / f"{PREFIX}.{r}.et").is_file() for r in ranks)
    merge_calls(out_dir)
    steps, step_stats = unprofiled_steps(out_dir, world)
    summary = CaptureSummary(
        world_size=world,
        step=metas[ranks[0]].get("step"),
        torch=str(metas[ranks[0]].get("torch", "")),
        step_s_by_rank={r: float(m["step_s"]) for r, m in metas.items()},
        start_offset_s_by_rank=({r: (t - min(starts.values())) * 1e-6 for r, t in starts.items()}
                                if len(host_names) == 1 and None not in host_names else {}),
        nodes=nodes,
        comm_bytes_by_group={g: dict(v) for g, v in sorted(by_group.items())},
        converted=converted,
        unprofiled_steps_s=steps,
        unprofiled_by_rank=step_stats,
        profiled_steps_s=_profiled_steps(out_dir),
    )
    write_text(out_dir / SUMMARY, json.dumps(summary.to_json(), indent=1) + "\n", "capture summary")
    return summary


def _profiled_steps(out_dir: Path) -> tuple[float | None, ...]:
    p = out_dir / "profiled.json"
    return tuple(read_json(p, "profiled steps").get("profiled_steps_s", ())) if p.is_file() else ()


def merge_calls(out_dir: Path) -> int:
    """DIR/calls/*.json -> DIR/calls.json (the `distscope measure log --out` format)."""
    parts = sorted((out_dir / "calls").glob("*.json"))
    if not parts:
        return 0
    calls: list[dict[str, Any]] = []
    for p in parts:
        calls += read_json(p, "log file").get("calls", [])
    calls.sort(key=lambda c: (c.get("rank", 0), c.get("start_s", 0.0)))
    write_text(out_dir / "calls.json", json.dumps({"calls": calls}) + "\n", "log file")
    return len(calls)


def load_summary(out_dir: Path) -> dict[str, Any]:
    """capture.json, its fields that `simulate` reads checked (one line naming a bad one: recapture)."""
    path = str(out_dir / SUMMARY)
    data: dict[str, Any] = read_json(out_dir / SUMMARY, "capture summary")
    if data.get("format") != SUMMARY_FORMAT:
        raise DistscopeError(f"capture summary {path!r}: format={data.get('format')!r}, need {SUMMARY_FORMAT}")

    def seconds(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")

    def bad(field: str, v: Any, need: str) -> DistscopeError:
        return DistscopeError(f"capture summary {path!r}: {field}={json.dumps(v)[:60]} must be {need}; recapture "
                              "with `distscope trace capture`")

    if not seconds(data.get("step_s")) or not data["step_s"]:
        raise bad("step_s", data.get("step_s"), "a step time in seconds > 0")
    if data.get("unprofiled_step_s") is not None and not (seconds(data["unprofiled_step_s"]) and data["unprofiled_step_s"]):
        raise bad("unprofiled_step_s", data["unprofiled_step_s"], "a step time in seconds > 0 (or absent)")
    for field in ("step_s_by_rank", "start_offset_s_by_rank"):
        by_rank = data.get(field, {})
        if not isinstance(by_rank, dict) or not all(k.isdigit() and seconds(v) for k, v in by_rank.items()):
            raise bad(field, by_rank, "an object of rank: seconds >= 0")
    return data
