"""The README's architecture tree names every module of the package (and only modules that exist)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "distscope"


def _tree() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("```\nsrc/distscope/")
    return text[start:text.index("\n```", start + 4)]


def test_every_module_is_in_the_architecture_tree() -> None:
    tree = _tree()
    missing = [str(p.relative_to(PKG)) for p in sorted(PKG.rglob("*.py"))
               if p.name != "__init__.py" and "_shim" not in p.parts
               and not re.search(rf"(?<![\w]){re.escape(p.stem)}\.py\b", tree)]
    assert missing == [], f"README architecture omits {missing}"


def test_every_named_package_exists() -> None:
    named = re.findall(r"^  (\w+)/ ", _tree(), flags=re.M)
    assert named and [n for n in named if not (PKG / n).is_dir()] == []
