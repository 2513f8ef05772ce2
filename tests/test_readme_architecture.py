"""The README's "Architecture: the folders" tree names what is really there, and all of it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mlcopilot"


def _tree() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Architecture: the folders", 1)[1]
    return section.split("```", 2)[1]


def _named(tree: str) -> set[str]:
    """Every ``name.py`` and ``name/`` the tree mentions."""
    return set(re.findall(r"(?<![\w./-])([A-Za-z_][\w-]*(?:\.py|/))", tree))


def test_every_top_level_module_and_package_is_in_the_tree() -> None:
    named = _named(_tree())
    entries = {
        f"{p.name}/" if p.is_dir() else p.name
        for p in PACKAGE.iterdir()
        if not p.name.startswith(("__", ".")) and (p.is_dir() or p.suffix == ".py")
    }
    missing = sorted(entries - named)
    assert not missing, f"README's architecture tree does not mention {missing}"


def test_every_name_in_the_tree_exists() -> None:
    known = {f"{p.name}/" if p.is_dir() else p.name for p in PACKAGE.rglob("*")}
    known |= {f"{p.name}/" for p in ROOT.iterdir() if p.is_dir()}
    # Names quoted as prose, not paths: the TOML file a user writes, the JSON Schema's name.
    stale = sorted(n for n in _named(_tree()) if n not in known and not n.endswith(".json"))
    assert not stale, f"README's architecture tree names what does not exist: {stale}"
