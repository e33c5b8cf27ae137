"""Where a sweep's results live while it runs, and how a killed sweep resumes.

While running, each finished point is appended to `OUT.partial.jsonl` (a header line, then one JSON
line per point, written whole and flushed to disk per batch); the output file itself is only written
at the end: encoded in full, written to `OUT.tmp`, synced, and renamed over OUT (atomic on POSIX),
after which the journal is removed. So OUT is always either absent, a previous complete output, or
the new complete output: never a partial one. On start, the points already in OUT (when it is a
complete sweep output) and in the journal are skipped; a truncated last journal line (the process was
killed mid-write) is ignored. Points are matched by key: the point's inputs and the plan settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.explore.formats import Format, read_results

JOURNAL_FORMAT = "distscope.explore.partial/1"


def check_out_path(out: Path) -> None:
    if not str(out).strip():
        raise DistscopeError("--out='' must be a file path")
    Format.of(out)
    if out.exists() and not out.is_file():
        raise DistscopeError(f"--out={str(out)!r} exists and is not a regular file")
    if not out.parent.is_dir():
        raise DistscopeError(f"--out={str(out)!r}: directory {str(out.parent)!r} does not exist")


class Store:
    def __init__(self, out: Path, *, fresh: bool = False) -> None:
        check_out_path(out)
        self.out, self.fmt, self.fresh = out, Format.of(out), fresh
        self.journal = out.with_name(out.name + ".partial.jsonl")
        self.tmp = out.with_name(out.name + ".tmp")
        self._fd: int | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """key -> raw result of the points OUT and the journal already hold; nothing when fresh."""
        if self.fresh:
            return {}
        done: dict[str, dict[str, Any]] = {}
        if self.out.exists():
            done.update(read_results(self.out, self.fmt))
        if self.journal.exists():
            done.update(self._read_journal())
        return done

    def _read_journal(self) -> list[tuple[str, dict[str, Any]]]:
        try:
            lines = self.journal.read_bytes().split(b"\n")
        except OSError as exc:
            raise DistscopeError(f"cannot read {self.journal}: {exc.strerror}") from None
        try:
            head = json.loads(lines[0])
        except (ValueError, UnicodeDecodeError):
            head = None
        if not isinstance(head, dict) or head.get("format") != JOURNAL_FORMAT:
            raise DistscopeError(f"{str(self.journal)!r} is not a distscope explore journal; remove it or pass --fresh")
        out = []
        for line in lines[1:]:
            try:
                rec = json.loads(line)
                out.append((str(rec["key"]), dict(rec["result"])))
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                continue  # a line cut short when the sweep was killed: that point runs again
        return out

    def open(self) -> None:
        """Start (or continue) the journal."""
        try:
            if self.fresh or not self.journal.exists():
                self.journal.write_text(json.dumps({"format": JOURNAL_FORMAT}) + "\n")
            else:
                data = self.journal.read_bytes()
                if data and not data.endswith(b"\n"):  # drop a line cut short by a kill
                    self.journal.write_bytes(data[: data.rfind(b"\n") + 1])
            self._fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise DistscopeError(f"--out={str(self.out)!r}: cannot write {self.journal.name}: {exc.strerror}") from None

    def append(self, results: list[tuple[str, dict[str, Any]]]) -> None:
        assert self._fd is not None
        data = b"".join(json.dumps({"key": k, "result": r}, allow_nan=False).encode() + b"\n" for k, r in results)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finish(self, data: bytes) -> None:
        """Write OUT atomically, then drop the journal."""
        self.close()
        try:
            with open(self.tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(self.tmp, self.out)
        except OSError as exc:
            raise DistscopeError(f"--out={str(self.out)!r}: cannot write it: {exc.strerror}") from None
        dir_fd = os.open(self.out.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self.journal.unlink(missing_ok=True)
