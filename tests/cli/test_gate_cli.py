"""The CI gate and the closing summary, through the installed ``mlcopilot`` command.

Piped (as in CI) and on a terminal (a pty): ``--fail-on`` with its flags, exit code 1 with the
reason in every report, and the summary every scan ends with (``--quiet``: only that).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testing.builders import dataset, dataset_urn, ml_feature, ml_model, write_metadata_file
from testing.installed_cli import Ran, run_cli, run_on_terminal

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
CHURN = "churn_predictor_v1"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def load(home: Path, tmp_path: Path, *mcps: Any) -> Path:
    path = write_metadata_file(tmp_path / "metadata.json", list(mcps))
    loaded = run_cli(home, "catalog", "load", str(path))
    assert loaded.code == 0, loaded.stderr
    return home


def scan(home: Path, *args: str) -> Ran:
    return run_cli(home, "scan", "--now", DAY1, *args)


def gate(report: dict[str, Any]) -> dict[str, Any]:
    verdict: dict[str, Any] = report["summary"]["gate"]
    return verdict


def last_lines(text: str, n: int) -> list[str]:
    """The last ``n`` non-blank lines, without their indentation."""
    return [line.strip() for line in text.splitlines() if line.strip()][-n:]


def test_fail_on_fails_for_a_finding_at_the_threshold_and_says_why(demo: Path) -> None:
    passed = scan(demo, "--fail-on", "critical", "--format", "json")
    assert passed.code == 0, passed.stderr
    assert gate(passed.json()) == {
        "passed": True,
        "fail_on": "critical",
        "fail_on_gaps": True,
        "fail_on_acknowledged": True,
        "fail_on_new": False,
        "reasons": [],
    }
    failed = scan(demo, "--fail-on", "high", "--format", "json")
    assert failed.code == 1
    report = failed.json()
    highs = sorted(
        f["id"] for m in report["models"] for f in m["findings"] if f["severity"] == "high"
    )
    assert len(highs) == 2
    [reason] = gate(report)["reasons"]
    assert reason["rule"] == "severity"
    assert reason["model"] == report["models"][0]["urn"]
    assert reason["incidents"] == highs
    assert reason["message"] == "2 findings at or above high"
    # The same verdict on stderr, the summary's last lines, while stdout stays the report.
    assert last_lines(failed.stderr, 2) == [
        "gate: FAILED (--fail-on high; coverage gaps fail it)",
        f"- {CHURN}: 2 findings at or above high: {', '.join(highs)}",
    ]


def test_a_truncated_walk_fails_the_gate_even_without_findings(demo: Path) -> None:
    # One hop reaches the features but not the datasets behind them: nothing is found.
    cut = scan(demo, "--dry-run", "--max-hops", "1", "--fail-on", "critical", "--format", "json")
    assert cut.code == 1
    report = cut.json()
    assert report["summary"]["findings"] == 0
    rules = [r["rule"] for r in gate(report)["reasons"]]
    assert rules[0] == "truncated"
    assert "truncated at 4 nodes" in gate(report)["reasons"][0]["message"]
    ignored = scan(demo, "--dry-run", "--max-hops", "1", "--fail-on", "critical",
                   "--no-fail-on-gaps")  # fmt: skip
    assert ignored.code == 0, ignored.stdout
    assert "gate: passed (--fail-on critical; coverage gaps ignored)" in ignored.stdout


def test_a_coverage_gap_fails_the_gate_in_markdown_too(home: Path, tmp_path: Path) -> None:
    # A model whose only feature records no source: lineage stops before any dataset.
    load(home, tmp_path, *ml_feature("f", "unsourced"), *ml_model("gappy", features=[
        "urn:li:mlFeature:(f,unsourced)"]))  # fmt: skip
    report = tmp_path / "report.md"
    done = scan(home, "--fail-on", "high", "--format", "markdown", "--output", str(report))
    assert done.code == 1, done.stderr
    text = report.read_text(encoding="utf-8")
    assert "**Gate: FAILED (--fail-on high; coverage gaps fail it)**" in text
    assert "- gappy: 1 coverage gap (lineage stops before a dataset at f.unsourced)" in text
    # The summary went to stdout (the report went to the file): the CI log ends with it.
    assert last_lines(done.stdout, 2) == [
        "gate: FAILED (--fail-on high; coverage gaps fail it)",
        "- gappy: 1 coverage gap (lineage stops before a dataset at f.unsourced)",
    ]


def test_an_upstream_that_all_lacked_metadata_fails_the_gate(home: Path, tmp_path: Path) -> None:
    # The training data is referenced but not in the catalog: no check could decide there.
    load(home, tmp_path, *ml_model("blind", training_data=[dataset_urn("raw.absent")]))
    done = scan(home, "--fail-on", "low", "--format", "json")
    assert done.code == 1, done.stderr
    reasons = gate(done.json())["reasons"]
    assert [r["rule"] for r in reasons] == ["all_unknown"]
    assert reasons[0]["message"].startswith("every upstream entity (1) lacked metadata")


def test_a_catalog_without_models_never_passes_a_gate(home: Path, tmp_path: Path) -> None:
    load(home, tmp_path, *dataset("raw.only", fields=[("id", "int")]))
    done = scan(home, "--fail-on", "low")
    assert done.code == 1, done.stderr
    assert last_lines(done.stdout, 1) == ["- scan: no model was scanned"]
    assert scan(home, "--fail-on", "low", "--no-fail-on-gaps").code == 0
    assert scan(home).code == 0  # no gate asked for: the note, exit 0 as before


def test_acknowledged_incidents_count_unless_ignored(demo: Path) -> None:
    first = scan(demo, "--format", "json")
    assert first.code == 0, first.stderr
    highs = [
        f["id"] for m in first.json()["models"] for f in m["findings"] if f["severity"] == "high"
    ]
    for incident in highs:
        acked = run_cli(demo, "incidents", "ack", incident, "--by", "ana")
        assert acked.code == 0, acked.stderr
    again = run_cli(demo, "scan", "--now", DAY2, "--fail-on", "high", "--format", "json")
    assert again.code == 1
    states = {f["id"]: f["incident"]["state"] for f in again.json()["models"][0]["findings"]}
    assert {states[i] for i in highs} == {"acknowledged"}
    ignored = run_cli(demo, "scan", "--now", DAY2, "--fail-on", "high", "--ignore-acknowledged")
    assert ignored.code == 0, ignored.stdout
    assert "gate: passed (--fail-on high; acknowledged ignored; coverage gaps fail it)" in (
        ignored.stdout
    )


def test_fail_on_new_counts_only_what_this_scan_opened(demo: Path) -> None:
    first = scan(demo, "--fail-on", "high", "--fail-on-new")
    assert first.code == 1  # the first scan opens every incident
    second = run_cli(demo, "scan", "--now", DAY2, "--fail-on", "high", "--fail-on-new")
    assert second.code == 0, second.stdout
    assert "gate: passed (--fail-on high; new incidents only; coverage gaps fail it)" in (
        second.stdout
    )


def test_fail_on_gaps_alone_gates_on_coverage_only(demo: Path) -> None:
    covered = scan(demo, "--dry-run", "--fail-on-gaps")
    assert covered.code == 0, covered.stdout  # two high findings, but no --fail-on
    assert "gate: passed (coverage gaps fail it)" in covered.stdout
    assert scan(demo, "--dry-run", "--fail-on-gaps", "--max-hops", "1").code == 1


@pytest.mark.parametrize("flag", ["--fail-on-new", "--ignore-acknowledged"])
def test_a_gate_modifier_without_fail_on_is_refused_before_anything_runs(
    home: Path, flag: str
) -> None:
    done = scan(home, flag)
    assert done.code == 2
    assert done.stderr.strip() == f"error: {flag}: only with --fail-on SEVERITY"
    assert not home.exists()  # refused before the catalog or the state was opened


def test_every_scan_ends_with_a_summary_in_ci(demo: Path) -> None:
    done = scan(demo)
    assert done.code == 0, done.stderr
    assert last_lines(done.stdout, 5) == [
        "Summary: scanned 1 model in " + summary_time(done.stdout),
        "findings: 3 (0 critical, 2 high, 1 medium, 0 low); by check: deprecated_source 1, "
        "pii_exposure 1, stale_source 1",
        "incidents: 3 opened, 0 still open, 0 resolved",
        "coverage: complete (no gaps, no truncated walk, nothing unknown)",
        "gate: none (no --fail-on)",
    ]


def summary_time(text: str) -> str:
    """The ``N.N s`` of the summary's headline (the one thing that differs run to run)."""
    headline = next(line for line in text.splitlines() if line.startswith("Summary: "))
    took = headline.removeprefix("Summary: scanned 1 model in ")
    assert took.endswith(" s"), headline
    assert float(took.removesuffix(" s")) >= 0, headline
    return took


def test_a_dry_run_summary_says_would(demo: Path) -> None:
    done = scan(demo, "--dry-run")
    assert done.code == 0, done.stderr
    assert "(dry run: nothing was stored or sent)" in done.stdout
    assert "incidents: 3 would open, 0 still open, 0 would resolve" in done.stdout


def test_summary_lines_are_never_wrapped_in_ci(demo: Path) -> None:
    done = run_cli(demo, "scan", "--now", DAY1, "--fail-on", "high", columns=40)
    assert done.code == 1
    ids = sorted(
        line.rsplit(": ", 1)[1] for line in done.stdout.splitlines() if "at or above" in line
    )
    assert len(ids) == 1
    assert len(ids[0].split(", ")) == 2  # both ids on the one reason line


def test_quiet_prints_only_the_summary(demo: Path) -> None:
    quiet = scan(demo, "--quiet", "--fail-on", "high")
    assert quiet.code == 1
    lines = last_lines(quiet.stdout, 100)
    assert lines[0].startswith("Summary: scanned 1 model in ")
    assert len(lines) == 6  # headline, findings, incidents, coverage, gate and its reason
    assert quiet.stderr == ""


def test_quiet_still_writes_the_report_asked_for(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = scan(demo, "-q", "--format", "json", "--output", str(out))
    assert done.code == 0, done.stderr
    assert out.is_file()
    assert done.stderr == ""  # no "Report written", no relay chatter
    assert done.stdout.lstrip().startswith("Summary: scanned 1 model")


@pytest.mark.slow
def test_on_a_terminal_the_summary_follows_the_table(demo: Path) -> None:
    done = run_on_terminal(demo, "scan", "--now", DAY1, "--fail-on", "high")
    assert done.code == 1
    text = done.stdout
    assert text.index(CHURN) < text.index("Summary: scanned 1 model")
    assert "gate: FAILED (--fail-on high; coverage gaps fail it)" in text
    assert f"- {CHURN}: 2 findings at or above high: " in text


@pytest.mark.slow
def test_quiet_on_a_terminal_shows_no_table(demo: Path) -> None:
    done = run_on_terminal(demo, "scan", "--now", DAY1, "-q")
    assert done.code == 0, done.stdout
    assert last_lines(done.stdout, 1) == ["gate: none (no --fail-on)"]
    assert "Summary: scanned 1 model in " in done.stdout
    # Neither the findings table nor the write-back list: their entity names are absent.
    assert "raw.customers" not in done.stdout
    assert "Write-back" not in done.stdout
