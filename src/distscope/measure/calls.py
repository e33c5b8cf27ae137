"""The logged-call record and its JSON file (torch-free, so analysis runs anywhere).

File: {"calls": [{"rank", "op", "bytes", "dtype", "group", "group_ranks", "dim", "seq", "step",
"start_s", "duration_s", "api"}, ...]}. `bytes` follows nccl-tests (see `distscope.comm.collective`);
start_s is wall-clock (time.time()) at issue; duration_s runs from issue to completion of the Work
(None when it never completed); seq counts calls per (rank, group), so (group, seq) names one
collective instance across ranks; step counts optimizer.step() calls completed before the issue; error
holds the first line of the exception when the Work failed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.userfile import read_json, write_text


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommCall:
    rank: int
    op: Collective
    bytes: int
    dtype: str
    group: str
    group_ranks: tuple[int, ...]
    dim: str
    seq: int
    step: int
    start_s: float
    duration_s: float | None
    api: str = "c10d"
    error: str | None = None  # set when the Work completed with an exception
    peer: int | None = None  # send / recv: the global rank at the other end (logs since issue 21)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["op"] = self.op.value
        d["group_ranks"] = list(self.group_ranks)
        if self.peer is None:
            del d["peer"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommCall:
        try:
            return cls(
                rank=int(d["rank"]),
                op=Collective.parse(d["op"]),
                bytes=int(d["bytes"]),
                dtype=str(d["dtype"]),
                group=str(d["group"]),
                group_ranks=tuple(int(r) for r in d.get("group_ranks", ())),
                dim=str(d["dim"]),
                seq=int(d.get("seq", -1)),
                step=int(d.get("step", 0)),
                start_s=float(d["start_s"]),
                duration_s=None if d.get("duration_s") is None else float(d["duration_s"]),
                api=str(d.get("api", "c10d")),
                error=d.get("error"),
                peer=None if d.get("peer") is None else int(d["peer"]),
            )
        except KeyError as exc:
            raise DistscopeError(f"call record is missing field {exc.args[0]!r}: {d}") from None


def save_calls(calls: Iterable[CommCall], path: Path) -> None:
    write_text(path, json.dumps({"calls": [c.to_dict() for c in calls]}) + "\n", "log file")


def load_calls(path: Path) -> list[CommCall]:
    data = read_json(path, "log file")
    if not isinstance(data.get("calls"), list):
        raise DistscopeError(f"log file={str(path)!r} has no 'calls' list")
    return [CommCall.from_dict(c) for c in data["calls"]]
