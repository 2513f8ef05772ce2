"""What the catalog wrote reaches the terminal and the markdown report clean.

Column names and a deprecation note carrying bidi overrides, zero-width characters, NUL, C0
and C1 controls, rich markup, Slack and GitHub mentions, HTML and backticks: through the
installed ``mlcopilot`` command, on a terminal, piped, and as the markdown report (which
usually becomes a pull-request comment).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from testing.builders import dataset, dataset_urn, ml_model, write_metadata_file
from testing.installed_cli import run_cli, run_on_terminal

TRICK = "amount\u202egnp.exe\u2066\u200b\u00ad\x00\x07\x85x"
"""Reads ``amountexe.png`` in a terminal that honours the override; hides NUL, BEL, NEL."""
LOUD = "[bold red]x[/] <!here> @channel `tick` <script>"
NOTE = "ask @data-team <!channel> #12 <img src=x> \u202eevil"
INVISIBLE = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u00ad\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sanitised")
    mcps = [
        *dataset(
            "raw.events",
            fields=[(TRICK, "string"), (LOUD, "string")],
            field_tags={TRICK: ["PII"], LOUD: ["PII"]},
        ),
        *dataset("legacy.feed", fields=[("a", "string")], deprecated=True, deprecation_note=NOTE),
        *ml_model("model", training_data=[dataset_urn("raw.events"), dataset_urn("legacy.feed")]),
    ]
    path = write_metadata_file(folder / "metadata.json", mcps)
    home = folder / "home"
    assert run_cli(home, "catalog", "load", str(path)).code == 0
    return home


def visible(text: str) -> None:
    """Nothing invisible or direction-changing is left (tab and newline aside)."""
    found = sorted({unicodedata.name(c, hex(ord(c))) for c in INVISIBLE.findall(text)})
    assert not found, found


@pytest.mark.slow
def test_the_terminal_shows_catalog_text_clean_and_literal(home: Path) -> None:
    shown = run_on_terminal(home, "scan", "--dry-run", columns=200)

    assert shown.code == 0, shown.stdout
    visible(shown.stdout)
    assert "amountgnp.exex" in shown.stdout  # the characters as they are, in their order
    assert "[bold red]x[/]" in shown.stdout  # markup shown, not applied
    assert 'note: "ask @data-team <!channel> #12 <img src=x> evil"' in shown.stdout


def test_piped_output_is_clean_too(home: Path) -> None:
    ran = run_cli(home, "scan", "--dry-run", columns=80)

    assert ran.code == 0, ran.stderr
    visible(ran.stdout + ran.stderr)
    assert "[bold red]x[/] <!here> @channel `tick` <script>" in ran.stdout


def test_errors_quoting_catalog_text_are_clean(home: Path) -> None:
    ran = run_cli(home, "scan", "--model", f"mod\u202eel{LOUD}")

    assert ran.code == 2
    visible(ran.stderr)
    assert "[bold red]x[/]" in ran.stderr


def test_the_markdown_report_renders_nothing_from_the_catalog(home: Path) -> None:
    ran = run_cli(home, "scan", "--dry-run", "--format", "markdown")

    assert ran.code == 0, ran.stderr
    text = ran.stdout
    visible(text)
    outside_code = re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)  # what renders as markdown
    for mention in ("@channel", "@data-team", "#12"):
        assert mention not in outside_code, mention
    assert not re.search(r"(?<!\\)<", outside_code)  # no tag: each "<" escaped
    for escaped in (r"\<\!channel\>", r"\<img src=x\>"):
        assert escaped in text
    assert "`@data-team`" in text
    assert "`#12`" in text
    # The backtick in the column name cannot end its code span early: a longer fence.
    assert "``[bold red]x[/] <!here> @channel `tick` <script>``" in text
    # Every finding row keeps its five cells: no "|" from the catalog splits one.
    rows = [line for line in text.splitlines() if line.startswith("| high") or "| medium" in line]
    assert len(rows) == 3
    for row in rows:
        assert len(re.findall(r"(?<!\\)\|", row)) == 6, row
