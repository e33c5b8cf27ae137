"""Every `distscope ...` example in the README is true to the code.

1. Each names a real command and only flags that command accepts (all examples, synopsis lines too).
2. Each concrete example that needs an extra (EXTRA_FOR) runs and exits 0, in order, in a scratch directory that sees the repo's
   `data/` and `docs/` (optional `[...]` parts are kept unless they hold a placeholder such as `K` or
   `P.json`; `a | b` alternatives take the first). Examples that need what a CI machine lacks are
   listed in SKIP with the test that covers them instead. The examples that need no extra run in
   tests/core/test_light_install.py, on the light main install (`pip install -e .`) that the README's
   first command makes: each example runs once, in the lightest install that can run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.cli_fuzz import commands

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = commands()
# example prefix -> why it is not run here (and what covers it)
SKIP = {
    "distscope simulate gen/ALL_REDUCE": "needs chakra_generator output and ASTRA-sim configs: tests/sim/test_astra_parity.py",
    "distscope measure log": "wraps the user's own train.py: tests/measure/test_logger.py runs it on examples/",
    "distscope report result.json": "needs a saved --json result: tests/report/test_html_report.py",
    "distscope explore sweep.yaml": "needs a running Ray cluster: tests/explore (Ray on a local instance)",
    "distscope trace capture --out gcap/": "needs a CUDA GPU: tests/measure/test_device_data.py replays captures "
                                           "made so on an H200",
}
# example prefix -> why CI skips running it (flags still checked); DISTSCOPE_FULL_README=1 runs them too
SLOW = {
    "distscope compress bench": "about 60 s of quantized collectives on 4 gloo ranks",
    "distscope measure algorithms": "about 15 s on 4 gloo ranks; tests/measure/test_algo_choice.py dispatches on gloo",
    "distscope serve validate": "--cv refits every fold: about 2 minutes",
    "distscope serve measure": "serves a real GPT on CPU for about a minute; tests/serve/test_serve_measure.py",
    "distscope explore docs/explore/hbm_70b.yaml": "72 plan searches",
}
# example prefix -> the extra it needs, a regex alternative (its install hint must name it). The examples
# that need none run on the light install only (tests/core/test_light_install.py)
EXTRA_FOR = {
    "distscope trace generate --model torch:": "torch|chakra",  # before the plain prefix: first match wins
    "distscope trace generate": "chakra",
    "distscope trace capture": "torch",
    "distscope serve diffusion": "torch|diffusion",
    "distscope serve plan --model torch:": "torch",
    "distscope serve measure --model torch:": "torch",
    "distscope simulate traces/": "chakra",
    "distscope simulate cap/": "chakra",
    "distscope simulate resnet_traces/": "chakra",
    "distscope measure": "torch",
    "distscope compress": "torch",
    "distscope serve measure": "torch",
    "distscope estimate --model torch:": "torch",
    "distscope plan --model torch:": "torch",
    "distscope explore --model llama3-70b --cluster dgx-h100 --gpus 1024": "parquet|report",  # --out *.parquet, --plot
}
PLACEHOLDER = re.compile(r"(?<![\w.-])([A-Z]{1,2}|[A-Z]\.\w+)(?![\w.-])")


def extra_for(example: str) -> str | None:
    """The extra a README example needs (EXTRA_FOR), or None."""
    return next((x for p, x in EXTRA_FOR.items() if example.startswith(p)), None)


def readme_examples() -> list[str]:
    """Every command line starting with `distscope` in the README's indented code blocks, continuation
    lines joined and trailing comments dropped."""
    out: list[str] = []
    pending = ""
    for line in (ROOT / "README.md").read_text().splitlines():
        if not line.startswith("    ") and not pending:
            continue
        text = pending + " " + line.strip() if pending else line.strip()
        if text.endswith("\\"):
            pending = text[:-1].strip()
            continue
        pending = ""
        text = re.sub(r"\s+#\s.*$", "", text).strip()
        if text.startswith("distscope "):
            out.append(" ".join(text.split()))
    return out


def command_of(example: str) -> tuple[str, list[str]]:
    """The longest command path an example names and its argument words."""
    words = example.split()[1:]
    for n in range(len(words), 0, -1):
        if " ".join(words[:n]) in COMMANDS:
            return " ".join(words[:n]), words[n:]
    raise AssertionError(f"README example names no distscope command: {example}")


def concrete(example: str) -> list[str] | None:
    """The example as runnable argv (see the module docstring), or None if it is a synopsis."""
    if "..." in example:
        return None
    text = re.sub(r"\s\|\s--[\w-]+\s[A-Z]\b", "", example)  # "--concurrency 64 | --batch B" -> first
    text = re.sub(r"\[([^\[\]]*)\]", lambda m: "" if "|" in m[1] or PLACEHOLDER.search(m[1]) else m[1], text)
    text = re.sub(r"\b(\S+) \| \S+", r"\1", text)  # "models | clusters" -> first
    return text.split()


EXAMPLES = readme_examples()


def test_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 20


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_uses_real_flags(example: str) -> None:
    path, args = command_of(example)
    known = {opt for p in COMMANDS[path] for opt in (*p.opts, *p.secondary_opts)}
    used = []
    for a in args:
        if a == "--":
            break  # what follows is the wrapped program's command line
        if a.startswith("--") or re.fullmatch(r"-\w", a):
            used.append(a.strip("[]").split("=")[0])
    unknown = [u for u in used if u not in known]
    assert not unknown, f"`distscope {path}` has no {unknown} (README: {example})"


def test_concrete_examples_run(tmp_path: Path) -> None:
    for d in ("data", "docs", "examples"):
        (tmp_path / d).symlink_to(ROOT / d)
    env = {**os.environ, "DISTSCOPE_PROGRESS": "0", "PYTHONPATH": str(ROOT / "src")}
    ran = 0
    for example in EXAMPLES:
        argv = concrete(example)
        if argv is None or any(example.startswith(s) for s in SKIP) or extra_for(example) is None:
            continue
        if not os.environ.get("DISTSCOPE_FULL_README") and any(example.startswith(s) for s in SLOW):
            continue
        r = subprocess.run([sys.executable, "-m", "distscope", *argv[1:]], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"README example failed ({r.returncode}): {' '.join(argv)}\n{r.stderr[-2000:]}"
        ran += 1
    assert ran >= 10
