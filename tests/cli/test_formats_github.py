"""``scan --format github``: workflow annotations and the job summary, through the installed
command, and catalog text that tries to inject a workflow command.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from mlcopilot.report.github import command, escape_data, escape_property
from testing.builders import dataset, dataset_urn, ml_model, write_metadata_file
from testing.hostile_names import BIDI
from testing.installed_cli import run_cli

DAY1 = "2026-11-20T09:00:00Z"
INJECT = "x\n::set-output name=a::b"
MASK = "y\r\n::add-mask::secret%0A::error::z,w"
ESCAPES = "ctl\a\x1b[31mred\x1b[0m\u200b\u202e"
INVISIBLE = re.compile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u00ad\x00-\x09\x0b-\x1f\x7f-\x9f]")


def test_findings_become_annotations_by_severity_and_the_summary_is_appended(
    demo: Path, tmp_path: Path
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    ran = run_cli(
        demo,
        *("scan", "--now", DAY1, "--format", "github", "--fail-on", "high"),
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert ran.code == 1, ran.stderr
    lines = ran.stdout.splitlines()
    kinds = sorted(line.split(" ", 1)[0] for line in lines)
    # Two high findings, one medium, and the failed gate's own error.
    assert kinds == ["::error", "::error", "::error", "::warning"]
    stale = next(line for line in lines if "stale_source" in line)
    assert stale.startswith("::error title=mlcopilot stale_source (high) on churn_predictor_v1::")
    assert "raw.transactions" in stale
    assert lines[-1] == (
        "::error title=mlcopilot gate::The gate failed: churn_predictor_v1: "
        "2 findings at or above high"
    )
    text = summary.read_text(encoding="utf-8")
    # Appended, not overwritten: earlier steps' summaries stay.
    assert text.startswith("earlier step\n# mlcopilot scan")
    assert "## Summary" in text
    assert "Summary:" in ran.stderr


def test_without_step_summary_only_the_annotations(demo: Path) -> None:
    ran = run_cli(demo, "scan", "--now", DAY1, "--format", "github")
    assert ran.code == 0, ran.stderr
    assert [line.split(" ", 1)[0] for line in ran.stdout.splitlines()] == [
        "::error",
        "::error",
        "::warning",
    ]


def test_a_column_named_to_inject_a_workflow_command_stays_inert(tmp_path: Path) -> None:
    mcps = [
        *dataset(
            "raw.events",
            fields=[(INJECT, "string"), (MASK, "string")],
            field_tags={INJECT: ["PII"], MASK: ["PII"]},
        ),
        *ml_model("model", training_data=[dataset_urn("raw.events")]),
    ]
    home = tmp_path / "home"
    path = write_metadata_file(tmp_path / "metadata.json", mcps)
    assert run_cli(home, "catalog", "load", str(path)).code == 0
    ran = run_cli(home, "scan", "--now", DAY1, "--format", "github")
    assert ran.code == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) == 2
    # Each line is one of our annotations, whole: the names' newlines are spaces (as in every
    # human format) and '%' is escaped.
    assert all(line.startswith("::error title=mlcopilot pii_exposure") for line in lines)
    assert "x ::set-output name=a::b" in ran.stdout
    assert "y ::add-mask::secret%250A::error::z,w" in ran.stdout
    assert "\r" not in ran.stdout


def test_catalog_text_reaches_the_log_clean(tmp_path: Path) -> None:
    """ESC, BEL, bidi overrides and zero-width characters never reach a terminal or a CI log
    (a column could set a terminal's title or colours, or reorder what the log shows)."""
    mcps = [
        *dataset(
            f"raw.ev{ESCAPES}ents",
            fields=[(ESCAPES, "string"), (BIDI, "string")],
            field_tags={ESCAPES: ["PII"], BIDI: ["PII"]},
        ),
        *ml_model(f"mo{ESCAPES}del", training_data=[dataset_urn(f"raw.ev{ESCAPES}ents")]),
    ]
    home = tmp_path / "home"
    path = write_metadata_file(tmp_path / "metadata.json", mcps)
    assert run_cli(home, "catalog", "load", str(path)).code == 0, "loaded"
    ran = run_cli(home, "scan", "--now", DAY1, "--format", "github", "--fail-on", "high")

    assert ran.code == 1, ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) == 3  # two findings and the gate
    found = sorted({unicodedata.name(c, hex(ord(c))) for c in INVISIBLE.findall(ran.stdout)})
    assert not found, found
    assert "ctl[31mred[0m" in ran.stdout  # the text as it is, less what is invisible
    assert "amountgnp.exex" in ran.stdout


def test_escaping_follows_the_toolkit() -> None:
    assert escape_data("50% a\r\nb:c,d") == "50%25 a%0D%0Ab:c,d"
    assert escape_property("50% a\r\nb:c,d") == "50%25 a%0D%0Ab%3Ac%2Cd"
    assert command("notice", "m:1", title="t:1,2") == "::notice title=t%3A1%2C2::m:1"
    assert command("warning", "m") == "::warning::m"
