"""The README's "Impact preview" section: its commands run, its example is real output."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from testing.installed_cli import run_cli
from tests.conftest import DEMO_DATA

REPO = Path(__file__).resolve().parents[2]
NOW = "2026-11-20T09:00:00Z"


def section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split("\n### Impact preview", 1)[1].split("\n## ", 1)[0]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), flags=re.DOTALL)


def commands() -> list[list[str]]:
    [bash] = blocks("bash")
    lines = [line.split("#", 1)[0].strip() for line in bash.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("mlcopilot impact")]


@pytest.fixture
def demo(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    loaded_home = tmp_path_factory.mktemp("readme") / "home"
    assert run_cli(loaded_home, "catalog", "load", str(DEMO_DATA / "01_catalog.json")).code == 0
    home = tmp_path / "home"
    shutil.copytree(loaded_home, home)
    return home


def test_the_example_output_is_what_the_first_command_prints(demo: Path) -> None:
    first = commands()[0]
    ran = run_cli(demo, *first[1:], "--now", NOW, columns=100)
    assert ran.code == 0, ran.stderr
    # The catalog is named by its file; the time taken varies.
    shown = ran.stdout.replace(f"lite:{demo / 'catalog.db'}", "lite:catalog.db")
    shown = re.sub(r"\(\d+\.\d s\)", "(0.2 s)", shown)
    [example] = re.findall(r"```\n(Impact preview of.*?)```", section(), flags=re.DOTALL)
    assert shown.rstrip("\n") == example.rstrip("\n")


def test_every_command_shown_runs_on_the_demo(demo: Path) -> None:
    shown = commands()
    assert len(shown) >= 4
    for command in shown:
        args = [
            str(DEMO_DATA / "02_schema_change.json") if a.endswith(".json") else a for a in command
        ]
        ran = run_cli(demo, *args[1:], "--now", NOW)
        assert ran.code in (0, 1), (command, ran.stderr)  # 1: a --fail-on that fails
        assert "error:" not in ran.stderr, (command, ran.stderr)


def test_the_workflow_posts_the_markdown_with_flags_the_command_has(demo: Path) -> None:
    [workflow] = [b for b in blocks("yaml") if "gh pr comment" in b]
    steps = yaml.safe_load(workflow)["jobs"]["impact"]["steps"]
    [preview] = [s["run"] for s in steps if "mlcopilot impact" in s.get("run", "")]
    [comment] = [s["run"] for s in steps if "gh pr comment" in s.get("run", "")]
    args = shlex.split(preview)
    output = args[args.index("--format", args.index("markdown") - 1) + 3]
    assert args[args.index("markdown") + 1 : args.index("markdown") + 3] == ["--output", output]
    assert f"--body-file {output}" in comment
    helped = run_cli(demo, "impact", "--help", columns=200)
    assert helped.code == 0
    for flag in (a for a in args if a.startswith("--")):
        assert flag in helped.stdout, flag
