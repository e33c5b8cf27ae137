"""`simulate --timeline`: concurrent work never shares a Chrome/Perfetto thread.

The viewers nest the 'X' slices of one (pid, tid) by time, so two slices there must be disjoint or
properly nested; a partial overlap is drawn wrongly (or dropped). Communication overlaps itself (a DP
all-reduce runs under the TP all-reduces of the next layers), so it gets one track per concurrent slice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from distscope.sim.result import partition_tracks

SRC = Path(__file__).resolve().parents[2] / "src"


def _cli(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "distscope", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(SRC), "DISTSCOPE_PROGRESS": "0"},
    )
    assert proc.returncode == 0, proc.stderr


def _slices_ns(events: list[dict]) -> dict[tuple[int, int], list[tuple[int, int, str]]]:
    """(pid, tid) -> [(start, end, name)] in whole nanoseconds, as a viewer reads ts/dur (microseconds)."""
    out: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            s = round(e["ts"] * 1000)
            out[(e["pid"], e["tid"])].append((s, s + round(e["dur"] * 1000), e["name"]))
    return out


def _partial_overlaps(slices: list[tuple[int, int, str]]) -> list[tuple[str, str]]:
    """Pairs (outer, inner) where inner starts inside outer and ends after it."""
    bad = []
    stack: list[tuple[int, str]] = []  # open slices' (end, name), innermost last
    for s, e, name in sorted(slices, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1][0] <= s:
            stack.pop()
        if stack and e > stack[-1][0]:
            bad.append((stack[-1][1], name))
        stack.append((e, name))
    return bad


def test_generated_trace_tracks_hold_no_partial_overlap(tmp_path: Path) -> None:
    # ZeRO-0 on tp2 x dp4: the DP gradient all-reduce partially overlaps the last TP all-reduces of backward
    _cli(
        "trace",
        "generate",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--tp",
        "2",
        "--zero",
        "0",
        "-o",
        str(tmp_path / "D"),
    )
    timeline = tmp_path / "t.json"
    _cli("simulate", str(tmp_path / "D"), "--cluster", "dgx-h100", "--gpus", "8", "--timeline", str(timeline))
    events = json.loads(timeline.read_text())["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks = _slices_ns(events)
    assert set(tracks) <= set(names), "every slice's thread is named"
    for key, slices in tracks.items():
        assert not _partial_overlaps(slices), (names[key], _partial_overlaps(slices)[:3])
    comm = {key: slices for key, slices in tracks.items() if names[key].startswith("comm ")}
    assert len(comm) >= 2, "the overlapping communication is split over several tracks"
    for key, slices in comm.items():  # concurrent collectives are not caller and callee: no nesting either
        ordered = sorted(slices)
        assert all(a[1] <= b[0] for a, b in pairwise(ordered)), names[key]


def test_partition_tracks_is_greedy_first_fit() -> None:
    #        0    10   20   30   40
    # a      [----------)
    # b           [---------)         overlaps a -> track 1
    # c                [---------)    a has ended -> track 0
    # d                     [---)     b has ended -> track 1
    slices = [(0, 20), (10, 30), (20, 40), (30, 35)]
    assert partition_tracks(slices) == [(0, 0), (1, 10), (0, 20), (1, 30)]
    # properly nested slices of concurrent streams still get their own track
    assert [t for t, _ in partition_tracks([(0, 100), (10, 20)])] == [0, 1]


def test_partition_tracks_absorbs_float_noise() -> None:
    # a start 1 ns before its predecessor's end (float rounding) stays on the track, clipped to the end
    assert partition_tracks([(0, 1000), (999, 2000)]) == [(0, 0), (0, 1000)]
    # but a slice that would vanish inside the previous one is a real overlap
    assert partition_tracks([(0, 1000), (999, 999)]) == [(0, 0), (1, 999)]
    assert partition_tracks([(0, 1000), (998, 2000)]) == [(0, 0), (1, 998)]
