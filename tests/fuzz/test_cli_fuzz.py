"""No tracebacks, ever: property-based fuzzing of every command and every input file type.

Each test draws invocations from hypothesis (derandomized, so CI runs the same inputs each time) and
checks the contract in cli_fuzz.check. The example counts add up to FUZZ_TOTAL (≥ 5,000 inputs).
"""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, VALIDATION
from tests.fuzz import cli_fuzz as F

COMMANDS = F.commands()
FUZZED = sorted(c for c in COMMANDS if c not in F.SPAWNING)
PER_COMMAND = 185  # x 18 fuzzed commands + 700 + 500 + 500 file inputs = 5,030 inputs per run
SETTINGS = dict(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True, scope="module")
def _scratch_cwd(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Run the commands in a scratch directory that sees the repository's data/, docs/ and examples/ (as
    test_readme_examples does): a fuzzed `--out ''` is the working directory (Path('') is '.'), and
    `trace generate` wrote its traces into the checkout."""
    d = tmp_path_factory.mktemp("cwd")
    for name in ("data", "docs", "examples"):
        (d / name).symlink_to(REPO / name)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        yield d


@st.composite
def invocation(draw: st.DrawFn, name: str) -> list[str]:
    params = COMMANDS[name]
    argv = list(draw(st.sampled_from(F.SEEDS.get(name, [[]]))))
    options = [p for p in params if getattr(p, "param_type_name", "") == "option"]
    arguments = [p for p in params if getattr(p, "param_type_name", "") == "argument"]
    for p in arguments:  # positional arguments first: a file from the pool, or nothing at all
        if draw(st.integers(0, 9)):
            argv.insert(0, draw(st.sampled_from(F.values_for(p))))
    for _ in range(draw(st.integers(0 if arguments else 1, 3))):
        if not options:
            break
        p = draw(st.sampled_from(options))
        opt = draw(st.sampled_from(list(p.opts) + list(getattr(p, "secondary_opts", []) or [])))
        if F.is_flag(p):
            argv.append(opt)
        else:
            argv += [opt, draw(st.sampled_from(F.values_for(p)))]
    return [*name.split(), *argv]


@pytest.mark.parametrize("name", FUZZED)
def test_every_command_with_mutated_flags(name: str) -> None:
    """PER_COMMAND invocations of each command (one test each: every command gets the same share, and a
    failure or a slow command is named)."""

    @settings(max_examples=PER_COMMAND, **SETTINGS)
    @given(invocation(name))
    def check(argv: list[str]) -> None:
        F.check(argv, F.run(argv))

    check()


# ---- file contents: a valid input with cells or bytes corrupted ------------------------------------

_HEADER, *_ROWS = list(csv.reader(io.StringIO((VALIDATION / "published_runs.csv").read_text())))
# Rows without `auto` cells predict in milliseconds (no search over the unknowns).
_FAST_ROWS = [r for r in _ROWS if "auto" not in r][:6] or _ROWS[:3]


@st.composite
def mutated_csv(draw: st.DrawFn) -> str:
    rows = [list(r) for r in draw(st.lists(st.sampled_from(_FAST_ROWS), min_size=1, max_size=2))]
    header = list(_HEADER)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 5))
        if kind == 0:  # drop a column
            i = draw(st.integers(0, len(header) - 1))
            header.pop(i)
            for r in rows:
                if i < len(r):
                    r.pop(i)
        elif kind == 1:  # a short row
            r = draw(st.sampled_from(rows))
            del r[draw(st.integers(0, max(len(r) - 1, 0))):]
        else:  # a nasty cell
            r = draw(st.sampled_from(rows))
            if not r:
                continue
            i = draw(st.integers(0, len(r) - 1))
            r[i] = draw(st.sampled_from(F.STRINGS + F.INTS + F.FLOATS))
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *rows])
    text = buf.getvalue()
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(max_examples=700, **SETTINGS)
@given(mutated_csv())
def test_validate_with_corrupted_csv(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("csv") / "runs.csv"
    path.write_text(text)
    argv = ["validate", str(path), "--json"]
    F.check(argv, F.run(argv))


@st.composite
def mutated_json(draw: st.DrawFn, base: str) -> str:
    text = base
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 3))
        i = draw(st.integers(0, len(text)))
        if kind == 0:
            text = text[:i]
        elif kind == 1:
            text = text[:i] + draw(st.sampled_from(['"', "}", "[", "-", "1e400", "null", ",", ":", "\\u0000"])) + text[i:]
        elif kind == 2:
            j = draw(st.integers(i, len(text)))
            text = text[:i] + text[j:]
        else:
            text = text.replace(draw(st.sampled_from(["4", "1", "e", "a", '"'])), draw(st.sampled_from(["-", "0", ""])), 1)
    return text


_HF = ('{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, '
       '"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, '
       '"max_position_embeddings": 8192, "tie_word_embeddings": false, "rope_theta": 500000.0}')


@settings(max_examples=500, **SETTINGS)
@given(mutated_json(_HF))
def test_estimate_with_corrupted_hf_config(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("hf") / "config.json"
    path.write_text(text)
    argv = ["estimate", "--model", str(path), "--gpus", "8", "--json"]
    F.check(argv, F.run(argv))


_PROFILE = ('{"schema": "distscope.system_profile/1", "name": "m", "device": "cpu gloo", "source": "t", '
            '"levels": {"default": {"all_reduce": {"alpha_s": 1e-4, "beta_s_per_byte": 2e-9, "max_rel_err": 0.1, '
            '"n_points": 8, "min_bytes": 1024, "max_bytes": 4194304, "nranks": 4, "dtype": "float32"}}}}')


@settings(max_examples=500, **SETTINGS)
@given(mutated_json(_PROFILE))
def test_estimate_with_corrupted_profile(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("prof") / "profile.json"
    path.write_text(text)
    argv = ["estimate", "--profile", str(path), "--json"]
    F.check(argv, F.run(argv))
