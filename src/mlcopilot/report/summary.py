"""The closing summary of every scan: what was scanned, found and done, and the gate's verdict.

One set of totals (:class:`ScanOutcome`) feeds the terminal's last lines, the markdown report's
summary section and the JSON report's ``summary`` (version 3), so the three never disagree.
A dry run says what it *would* open and resolve: it stored nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from mlcopilot.incidents.gate import GateVerdict
from mlcopilot.model import Severity
from mlcopilot.notify.relay import RelayReport
from mlcopilot.scan import ScanResult
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

SEVERITIES = tuple(sorted(Severity, key=lambda s: -s.rank))
"""Severities, most urgent first: the order totals are shown in."""


@dataclass(frozen=True, slots=True)
class ScanOutcome:
    """What the closing summary says about one scan."""

    result: ScanResult
    verdict: GateVerdict | None
    """The gate's verdict; None when no gate was asked for (no ``--fail-on``)."""
    seconds: float | None = None
    """Time the scan took, from the command's start to its result (None: not measured)."""

    @property
    def by_severity(self) -> dict[str, int]:
        """Findings per severity, every severity present, most urgent first."""
        counted = Counter(f.severity for f in self.result.findings)
        return {s.value: counted[s] for s in SEVERITIES}

    @property
    def by_check(self) -> dict[str, int]:
        """Findings per check, by check name (checks without findings left out)."""
        counted = Counter(f.check for f in self.result.findings)
        return dict(sorted(counted.items()))

    @property
    def truncated(self) -> int:
        """Models whose walk a hop or node cap cut short."""
        return sum(1 for m in self.result.models if m.lineage.truncated)


def summary_lines(closing: ScanOutcome, *, gate: bool = True) -> list[str]:
    """The summary as plain lines (no markup): a headline, one line per subject, the gate."""
    result = closing.result
    dry = result.dry_run
    took = f" in {_duration(closing.seconds)}" if closing.seconds is not None else ""
    lines = [
        f"Summary: scanned {count(len(result.models), 'model')}{took}"
        + (" (dry run: nothing was stored or sent)" if dry else "")
    ]
    findings = len(result.findings)
    by_severity = ", ".join(f"{n} {s}" for s, n in closing.by_severity.items())
    by_check = ", ".join(f"{c} {n}" for c, n in closing.by_check.items())
    line = f"findings: {findings}"
    if findings:
        line += f" ({by_severity}); by check: {by_check}"
    lines.append(line)
    if result.models:
        changes = result.changes
        opened, resolved = ("would open", "would resolve") if dry else ("opened", "resolved")
        lines.append(
            f"incidents: {len(changes.opened)} {opened}, {len(changes.updated)} still open, "
            f"{len(changes.resolved)} {resolved}"
        )
    lines.append(f"coverage: {_coverage(closing)}")
    relay = result.relay
    if relay is not None and (not relay.ok or relay.elsewhere):
        lines.append(f"delivery: {_delivery(relay)} (`mlcopilot outbox list`)")
    if gate:
        lines += gate_lines(closing.verdict)
    return lines


def gate_lines(verdict: GateVerdict | None) -> list[str]:
    """The gate's verdict: ``gate: passed (...)``, or ``gate: FAILED (...)`` and each reason."""
    if verdict is None:
        return ["gate: none (no --fail-on)"]
    rules = verdict.rules
    applied = []
    if rules.fail_on is not None:
        applied.append(f"--fail-on {rules.fail_on.value}")
        if rules.new_only:
            applied.append("new incidents only")
        if not rules.acknowledged:
            applied.append("acknowledged ignored")
    applied.append("coverage gaps fail it" if rules.fail_on_gaps else "coverage gaps ignored")
    head = f"gate: {'passed' if verdict.passed else 'FAILED'} ({'; '.join(applied)})"
    lines = [head]
    for reason in verdict.reasons:
        where = short_name(reason.model) if reason.model is not None else "scan"
        ids = f": {', '.join(reason.incidents)}" if reason.incidents else ""
        lines.append(f"  - {where}: {reason.message}{ids}")
    return lines


def print_summary(closing: ScanOutcome, console: Console) -> None:
    """Print the closing summary: the last lines of a scan, on a terminal and in CI logs."""
    console.print()
    lines = summary_lines(closing)
    verdict = closing.verdict
    for line in lines:
        text = escape(line)
        if line.startswith("gate: ") and verdict is not None:
            text = f"[{'green' if verdict.passed else 'bold red'}]{text}[/]"
        text = f"[bold]{text}[/]" if line.startswith("Summary:") else "  " + text
        # Never wrapped: a CI log keeps each line whole, for grep and for copying ids.
        console.print(text, soft_wrap=True)


def _delivery(relay: RelayReport) -> str:
    """Everything that makes the relay's run not ok (exit 5), so the line and the code agree.

    And the rows another process still running on this host is delivering: no failure of this
    run, but said, so a row is never left unaccounted for.
    """
    parts = []
    if not relay.ok:
        parts = [f"{len(relay.dead)} dead", f"{len(relay.retrying)} to retry"]
    if relay.possible_duplicates:
        # Delivered, but perhaps twice: counted apart from the delivered rows, never as done.
        parts.append(count(len(relay.possible_duplicates), "possible duplicate"))
    if relay.stopped is not None:
        parts.append("the run stopped at its deadline with rows left for the next")
    if relay.elsewhere:
        holders = {item.lease_owner for item, _ in relay.elsewhere}
        who = "another process" if len(holders) == 1 else f"{len(holders)} other processes"
        parts.append(f"{len(relay.elsewhere)} being delivered by {who}")
    return ", ".join(parts)


def _coverage(closing: ScanOutcome) -> str:
    totals = closing.result.summary
    if not totals.models:
        return "nothing scanned"
    parts = []
    if totals.gaps:
        parts.append(
            f"{count(totals.models_with_gaps, 'model')} with coverage gaps "
            f"({count(totals.gaps, 'gap')})"
        )
    if closing.truncated:
        parts.append(f"{count(closing.truncated, 'walk')} truncated")
    if totals.unknown:
        parts.append(f"{count(totals.unknown, 'entity')} lacked metadata a check needed")
    return "; ".join(parts) if parts else "complete (no gaps, no truncated walk, nothing unknown)"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"
