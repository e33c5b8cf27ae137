"""Reading and writing the files a user hands distscope: every failure is one DistscopeError line.

A missing file, a directory, unreadable bytes, text that is not UTF-8, JSON that does not parse or
is not the expected kind of value, CSV the csv module cannot split, and an unwritable output path all
name the file and what is wrong with it (the CLI prints that line and exits 2), instead of an
OSError/UnicodeDecodeError/JSONDecodeError/csv.Error traceback from deep inside a reader.

Text loses a leading UTF-8 byte-order mark (spreadsheets and Windows editors write one), and CSV header
names lose it and the spaces around them (`run_id, gpu` names `gpu`), here and nowhere else, so that no
reader reports a column missing that the file has.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError, closest

_KIND: dict[type, str] = {dict: "object", list: "array"}
_BOM = "\ufeff"


def read_text(path: str | Path, what: str) -> str:
    """The file's UTF-8 text. `what` names the input in the message, e.g. 'profile' or 'CSV'."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8").removeprefix(_BOM)
    except UnicodeDecodeError as exc:
        raise DistscopeError(f"{what} {str(p)!r}: not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x})") from None
    except IsADirectoryError:
        raise DistscopeError(f"{what} {str(p)!r} is a directory, not a file") from None
    except FileNotFoundError:
        raise DistscopeError(f"{what} {str(p)!r} does not exist") from None
    except OSError as exc:
        raise DistscopeError(f"{what} {str(p)!r}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:  # a path the OS cannot take, e.g. one with a NUL byte
        raise DistscopeError(f"{what} {str(p)!r}: not a usable path ({exc})") from None


def read_json(path: str | Path, what: str, expect: type | None = dict) -> Any:
    """Parsed JSON from the file; with `expect`, the top-level value must be of that type."""
    text = read_text(path, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DistscopeError(f"{what} {str(path)!r}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise DistscopeError(f"{what} {str(path)!r}: JSON nested too deeply") from None
    if expect is not None and not isinstance(data, expect):
        raise DistscopeError(f"{what} {str(path)!r}: expected a JSON {_KIND.get(expect, expect.__name__)}, "
                             f"got {type(data).__name__}")
    return data


def read_yaml(path: str | Path, what: str) -> Any:
    """Parsed YAML from the file (`read_text`); a syntax error is one line with its position."""
    import yaml

    text = read_text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise DistscopeError(f"{what} {path}: not valid YAML ({' '.join(str(e).split())[:160]})") from None


def check_keys(d: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """One line naming the first key of a mapping read from a file that is not one of `allowed`."""
    for k in d:
        if k not in allowed:
            raise DistscopeError(f"{where}: unknown key {k!r}{closest(str(k), allowed)}")


def mappings(raw: Any, key: str, keys: tuple[str, ...], where: str) -> list[tuple[str, dict[str, Any]]]:
    """A non-empty list of mappings (`key`'s value, read from a file), each with only `keys`: (where, entry)
    pairs, `where` naming the entry (`FILE key[3]`) for the readers' own messages; one line otherwise."""
    shape = "{" + ", ".join(keys[:3]) + "}"
    if not isinstance(raw, list) or not raw:
        raise DistscopeError(f"{where}: {key} must be a non-empty list of {shape}")
    out = []
    for i, e in enumerate(raw):
        w = f"{where} {key}[{i}]"
        if not isinstance(e, dict):
            raise DistscopeError(f"{w}: expected {shape}, got {e!r}")
        check_keys(e, keys, w)
        out.append((w, e))
    return out


def num_field(d: dict[str, Any], key: str, where: str, default: float | None = None, *,
              positive: bool = True) -> float:
    """A finite number from a mapping read from a file (> 0 unless positive=False); one line otherwise."""
    v = d.get(key, default)
    if v is None:
        raise DistscopeError(f"{where}: {key} is required")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise DistscopeError(f"{where}: {key}={v!r} is not a number") from None
    if not math.isfinite(x):
        raise DistscopeError(f"{where}: {key}={v!r} (need a finite number)")
    if positive and not x > 0:
        raise DistscopeError(f"{where}: {key}={v!r} (need > 0)")
    return x


def int_field(d: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    """A positive whole number from a mapping read from a file; one line otherwise."""
    x = num_field(d, key, where, default)
    if x != int(x):
        raise DistscopeError(f"{where}: {key}={d.get(key)!r} (need a whole number)")
    return int(x)


def header_names(names: Iterable[str | None]) -> list[str]:
    """CSV column names as the user meant them: no byte-order mark, no surrounding white space."""
    return [(n or "").replace(_BOM, "").strip() for n in names]


def parse_csv(text: str, what: str, path: str | Path) -> tuple[list[str], list[tuple[int, dict[str | None, Any]]]]:
    """The header (normalised by `header_names`) and each data row with the file line it ends on.

    A row maps column name to cell; a short row's missing cells are None, a long row's extra cells are
    a list under the key None (csv.DictReader's convention). Blank lines are skipped. No header at all
    gives ([], []). A column named twice and text the csv module cannot split are one error line."""
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if reader.fieldnames is None:
            return [], []
        names = header_names(reader.fieldnames)
        twice = sorted({n for n in names if n and names.count(n) > 1})
        if twice:
            raise DistscopeError(f"{what} {str(path)!r}: column {twice[0]!r} appears more than once in the header")
        reader.fieldnames = names
        return names, [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise DistscopeError(f"{what} {str(path)!r}: not a readable CSV ({exc})") from None


def read_csv(path: str | Path, what: str) -> tuple[list[str], list[tuple[int, dict[str | None, Any]]]]:
    """`parse_csv` of the file's text (`read_text`)."""
    return parse_csv(read_text(path, what), what, path)


def write_text(path: str | Path, text: str, what: str) -> None:
    """Write the file, creating missing parent directories; failures name the path. The text goes to a
    hidden temporary file beside it, renamed over it once complete, so a reader never sees half a file
    (a rank's call log read while the rank is being killed did)."""
    import os
    import secrets

    p = Path(path)
    if not p.name or p.is_dir():  # no name: '.' or '' (a typer Path turns '' into '.')
        raise DistscopeError(f"{what} {str(p)!r} is a directory; give a file name")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as exc:
        raise DistscopeError(f"cannot write {what} {str(p)!r} ({exc.strerror or exc})") from None
    finally:
        tmp.unlink(missing_ok=True)


def out_path(value: str, field: str) -> Path:
    """An output path given on the command line. An empty one is refused: typer would turn '' into '.',
    and a command would then write (or clear its earlier files) in the working directory unasked."""
    if not value.strip():
        raise DistscopeError(f"{field}={value!r}: an empty output path; name a file or folder")
    return Path(value)


def check_writable_dir(path: str | Path, what: str) -> None:
    """Create the output directory (and parents) or fail with one line naming it."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise DistscopeError(f"{what} {str(p)!r} exists and is not a directory") from None
    except OSError as exc:
        raise DistscopeError(f"cannot create {what} {str(p)!r} ({exc.strerror or exc})") from None
