"""Shared machinery for fuzzing the whole command line in-process.

`run(argv)` calls the real entry point (`distscope.cli.main`) with stdout/stderr captured and a wall-clock
alarm, and `check(argv, result)` asserts the contract every command owes its user, whatever the input:
- exit code 0, 2 (bad input) or 1 (only `validate`, when a row fails); never 3 (an internal error);
- no Python traceback anywhere in the output;
- on exit 2, stderr ends in exactly one `distscope: error: ...` line (warnings may precede it);
- it finishes within ALARM_S seconds.

The command tree is discovered from the typer app, so a new command is fuzzed without editing this file;
`SEEDS` holds valid invocations that mutations start from, so the fuzzer reaches past argument parsing.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

import typer.main

from distscope.cli import app, main
from tests.conftest import VALIDATION

# A hang detector, not a speed target: every fuzzed command normally finishes in about a second, but
# this shared 2-core host has stalled a whole process for ~30 s (a full run on 2026-11-24 failed
# once at 30 s on an input that then took 0.9 s).
ALARM_S = 120

# Commands that launch processes (torchrun, training loops) or long measurements: fuzzing them
# in-process would spend the CI budget on real work. Their own tests cover their bad input.
SPAWNING = {"measure collectives", "measure algorithms", "measure log", "measure kernels", "compress bench",
            "compress convergence",
            "serve measure"}

# Valid invocations to mutate (cheap ones: small models, few GPUs, no simulator re-ranking).
SEEDS: dict[str, list[list[str]]] = {
    "estimate": [[], ["--model", "llama3-70b", "--gpus", "64", "--tp", "4", "--pp", "4", "--vp", "5",
                      "--global-batch", "128", "--seq", "8192", "--json"],
                 ["--model", "mixtral-8x7b", "--gpus", "16", "--tp", "2", "--ep", "4", "--json"],
                 ["--model", "dlrm:data/evidence/dlrm/mlperf_dlrm_v1.yaml", "--cluster", "dgx-a100", "--gpus", "16",
                  "--global-batch", "71680", "--sharding", "hugectr:hybrid:frequent=50000:infrequent=4480", "--json"]],
    "plan": [["--model", "llama3-8b", "--gpus", "8", "--global-batch", "32", "--simulate-top", "0", "--top", "2"],
             ["--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus", "16", "--simulate-top", "0", "--json"]],
    "trace generate": [["--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--pp", "2", "--symmetric"]],
    "validate": [["--json"]],
    "serve simulate": [["--requests", "200", "--rate", "5"]],
    "serve plan": [["--model", "llama3-8b", "--gpus", "2", "--simulate-top", "1", "--requests", "50", "--batches", "64",
                    "--no-disaggregate"]],
    "explore": [["--model", "llama3-8b", "--gpus", "8", "--global-batch", "32", "--no-compression"]],
}


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


class _Alarm(BaseException):
    """Not an Exception: the CLI turns any Exception into 'internal error' (exit 3), which would hide
    that the command was still running."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Alarm()


def run(argv: list[str]) -> Result:
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(ALARM_S)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except _Alarm:
        raise AssertionError(f"distscope {' '.join(argv)}: still running after {ALARM_S} s") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Result(code, out.getvalue(), err.getvalue())


def check(argv: list[str], r: Result) -> None:
    cmd = " ".join(argv[:2])
    where = f"distscope {' '.join(repr(a) if ' ' in a or not a else a for a in argv)}"
    assert "Traceback (most recent call last)" not in r.err + r.out, f"{where}: traceback\n{r.err[-2000:]}"
    assert r.code != 3, f"{where}: internal error: {r.err.strip()}"
    allowed = {0, 2} | ({1} if cmd.startswith("validate") else set())
    assert r.code in allowed, f"{where}: exit {r.code}: {r.err.strip()[-500:]}"
    if r.code == 2:
        lines = [ln for ln in r.err.strip().splitlines() if ln.strip()]
        assert lines and lines[-1].startswith("distscope: error: "), f"{where}: stderr {r.err.strip()[-500:]!r}"
        assert sum(ln.startswith("distscope: error: ") for ln in lines) == 1, f"{where}: {r.err!r}"


def commands() -> dict[str, list]:
    """'sub command' -> its click parameters, for every leaf command of the app."""
    found: dict[str, list] = {}

    def walk(c: object, path: list[str]) -> None:
        subs = getattr(c, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = list(getattr(c, "params", []))

    walk(typer.main.get_command(app), [])
    return found


# ---- nasty values -------------------------------------------------------------------------------

INTS = ["-1", "0", "1", "2", "3", "7", "8", "64", "1000003", "1000000", str(2**40), "abc", "", "1.5", "-0"]
FLOATS = ["-1", "0", "nan", "inf", "-inf", "1e309", "0.5", "1e-300", "x", ""]
STRINGS = ["", "x", "none", "auto", "-1", "0", "nan", "ünï©ødé", "a" * 300, ",,,", "=", "a=b=c", "dp=int4",
           "nvlink=-3", "nvlink=0", "ib=abc", "dp,tp,pp", "dp,xx", "flash", "fp8", "fp4", "int4", "bf16",
           "llama3-8b", "gpt3-175b", "dgx-h100", "dgx-a100", "1f1b", "zb-h1", "interleaved-1f1b", "full",
           "selective", "1,2,3", "0,0", "-1,2", "8,8,8,8", "shared", "unaware", "median", "all_reduce",
           "\x00", "--json", "$HOME", "../../etc/passwd"]


def fuzz_files(root: Path) -> list[str]:
    """Files a user might wrongly pass: empty, binary, truncated, wrong-schema, directories, missing."""
    rng = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    csv_text = (VALIDATION / "published_runs.csv").read_text()
    files: dict[str, bytes | str] = {
        "empty.csv": "", "empty.json": "", "empty.yml": "",
        "binary.bin": bytes(rng.randrange(256) for _ in range(4096)),
        "binary.csv": b"\xff\xfe\x00\x81" * 300,
        "truncated.csv": csv_text[: len(csv_text) // 7],
        "header_only.csv": csv_text.splitlines()[0] + "\n",
        "not_csv.csv": "hello\nworld\n",
        "list.json": "[1, 2, 3]", "null.json": "null", "dict.json": "{}", "num.json": "1e999",
        "truncated.json": '{"schema": "distscope.system_profile/1", "levels": {"default": {"all_re',
        "wrong_schema.json": '{"schema": "distscope.system_profile/99", "levels": {}}',
        "profile_neg.json": '{"schema": "distscope.system_profile/1", "name": "x", "device": "cpu", "source": "",'
                            ' "levels": {"default": {"all_reduce": {"alpha_s": -1, "beta_s_per_byte": 1e-9,'
                            ' "max_rel_err": 0.1, "n_points": 3, "min_bytes": 1, "max_bytes": 2, "nranks": 4,'
                            ' "dtype": "float32"}}}}',
        "hf_partial.json": '{"model_type": "llama", "hidden_size": 4096}',
        "hf_negative.json": '{"model_type": "llama", "hidden_size": -4096, "num_hidden_layers": 0,'
                            ' "num_attention_heads": 0, "intermediate_size": 1, "vocab_size": 0}',
        "hf_list.json": '[{"model_type": "llama"}]',
        "bad.yml": "a: [1, 2\n  b: }", "tabs.yml": "\tkey:\tvalue\n", "python.yml": "!!python/object:os.system {}",
        "ascii.txt": "# nccl-tests\n#  size count type redop root time algbw busbw\n 8 2 float sum -1 x y z\n",
        "trace/t.0.et": bytes(rng.randrange(256) for _ in range(512)),
        "trace/t.1.et": b"",
    }
    for name, content in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "a_directory").mkdir(exist_ok=True)
    return [str(root / n) for n in files] + [str(root / "trace"), str(root / "a_directory"),
                                               str(root / "missing.csv"), "/proc/nope/out.json", "/dev/null", ""]


FILES = fuzz_files(Path(tempfile.mkdtemp(prefix="distscope-fuzz-")))
OUT_DIR = Path(tempfile.mkdtemp(prefix="distscope-fuzz-out-"))
PATHLIKE = ("out", "report", "timeline", "profile", "network", "system", "file", "target", "csv", "inputs",
            "log", "trace", "spec", "config", "yaml", "o")


def values_for(param: object) -> list[str]:
    """A pool of values for one parameter, chosen by its default's type and its name."""
    name = str(getattr(param, "name", "") or "")
    default = getattr(param, "default", None)
    if any(name == k or name.startswith(k + "_") or name.endswith("_" + k) for k in PATHLIKE):
        return [*FILES, str(OUT_DIR / "out.json"), str(OUT_DIR / "out.html"), str(OUT_DIR)]
    if isinstance(default, bool):
        return ["true"]
    if isinstance(default, int):
        return INTS
    if isinstance(default, float):
        return FLOATS
    return STRINGS + INTS[:6]


def is_flag(param: object) -> bool:
    return bool(getattr(param, "is_flag", False))


def env_without_tty() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "100", "TERM": "dumb"}
