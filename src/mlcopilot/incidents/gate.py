"""The CI gate's verdict, as a pure function of a scan's reports and incident changes.

``mlcopilot scan --fail-on SEVERITY`` exits 1 when the gate fails. It fails for a finding at or
above the threshold, and, unless ``--no-fail-on-gaps``, for a model the scan could not really
check: a walk cut short by a cap, an upstream where every entity lacked metadata a check
needed, a coverage gap, or no model at all. A gate must never pass on nothing: "no findings"
from a walk that saw nothing is not a clean bill.

Every failure is a :class:`GateReason` naming the model and the rule, so the report can say
why the gate failed, not only that it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mlcopilot.model import (
    Finding,
    Incident,
    IncidentChanges,
    IncidentState,
    Lineage,
    ModelReport,
    Severity,
    Urn,
)
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

GateRule = Literal["severity", "truncated", "all_unknown", "coverage_gap", "nothing_scanned"]
"""Why a gate failed: a finding at or above the threshold, or one of the coverage rules."""

COVERAGE_RULES: frozenset[GateRule] = frozenset(
    {"truncated", "all_unknown", "coverage_gap", "nothing_scanned"}
)
"""The rules ``fail_on_gaps`` switches on."""


@dataclass(frozen=True, slots=True)
class GateRules:
    """What makes the gate fail (``scan --fail-on`` and the flags beside it)."""

    fail_on: Severity | None = None
    """Fail for a finding at or above this severity; None: findings alone never fail it."""
    fail_on_gaps: bool = True
    """Fail for a model the scan could not fully check (see :data:`COVERAGE_RULES`)."""
    acknowledged: bool = True
    """Count findings whose incident someone acknowledged. On by default: an acknowledgement
    says someone is on it, not that the risk is gone."""
    new_only: bool = False
    """Count only findings whose incident this scan opened (new ones and recurrences)."""


@dataclass(frozen=True, slots=True)
class GateReason:
    """One reason the gate failed: a rule, the model it failed for and what was seen."""

    rule: GateRule
    model: Urn | None
    """The model, or None for a rule about the scan as a whole (``nothing_scanned``)."""
    message: str
    """One sentence for the reports, e.g. ``2 findings at or above high``."""
    incidents: tuple[str, ...] = ()
    """For ``severity``: the incident ids that counted, sorted."""


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """The gate's outcome: the rules it applied and every reason it failed (none: it passed)."""

    rules: GateRules
    reasons: tuple[GateReason, ...] = ()

    @property
    def passed(self) -> bool:
        """True when no rule failed."""
        return not self.reasons


def evaluate_gate(
    rules: GateRules, models: Sequence[ModelReport], changes: IncidentChanges
) -> GateVerdict:
    """The gate's verdict on one scan.

    Args:
        rules: What makes the gate fail.
        models: The scan's reports, one per model, in scan order.
        changes: The scan's incident changes; a finding's incident is among ``opened`` (opened by
            this scan) or ``updated`` (already open, with its state: open or acknowledged).

    Returns:
        The verdict, its reasons in model order and, within a model, severity first.
    """
    if not models:
        if not rules.fail_on_gaps:
            return GateVerdict(rules)
        return GateVerdict(rules, (GateReason("nothing_scanned", None, "no model was scanned"),))
    incidents = _incidents_by_id(changes)
    reasons: list[GateReason] = []
    for report in models:
        if rules.fail_on is not None:
            counted = _counted(rules, rules.fail_on, report.findings, incidents)
            if counted:
                reasons.append(
                    GateReason(
                        "severity",
                        report.urn,
                        f"{count(len(counted), 'finding')} at or above {rules.fail_on.value}",
                        counted,
                    )
                )
        if rules.fail_on_gaps:
            reasons += _coverage_reasons(report)
    return GateVerdict(rules, tuple(reasons))


def _incidents_by_id(changes: IncidentChanges) -> dict[str, tuple[Incident, bool]]:
    """Each incident of a finding, and whether this scan opened it."""
    found = {i.id: (i, False) for i in changes.updated}
    found.update((i.id, (i, True)) for i in changes.opened)
    return found


def _counted(
    rules: GateRules,
    threshold: Severity,
    findings: Sequence[Finding],
    incidents: dict[str, tuple[Incident, bool]],
) -> tuple[str, ...]:
    """The incident ids of ``findings`` that count toward the severity rule, sorted."""
    counted: set[str] = set()
    for finding in findings:
        if not finding.severity.at_least(threshold):
            continue
        # Every finding is reconciled into an incident; one that is not (a caller that passes
        # findings without their changes) counts as new and open, the strict reading.
        incident, new = incidents.get(finding.id, (None, True))
        state = incident.state if incident is not None else IncidentState.OPEN
        if rules.new_only and not new:
            continue
        if not rules.acknowledged and state is IncidentState.ACKNOWLEDGED:
            continue
        counted.add(finding.id)
    return tuple(sorted(counted))


def truncated_walk(lineage: Lineage) -> str:
    """The one sentence every report gives for a walk cut short (``lineage.truncated``)."""
    return (
        f"the walk was truncated at {count(len(lineage.nodes), 'node')} "
        "(a hop or node cap was reached): what lies beyond was not checked"
    )


def _coverage_reasons(report: ModelReport) -> list[GateReason]:
    reasons: list[GateReason] = []
    lineage = report.lineage
    if lineage.truncated:
        reasons.append(GateReason("truncated", report.urn, truncated_walk(lineage)))
    upstream = [urn for urn in lineage.nodes if urn != lineage.root]
    if upstream and all(urn in report.unknown for urn in upstream):
        reasons.append(
            GateReason(
                "all_unknown",
                report.urn,
                f"every upstream entity ({len(upstream)}) lacked metadata a check needed: "
                "nothing upstream was fully checked",
            )
        )
    if report.gaps:
        shown = ", ".join(short_name(g.entity) for g in report.gaps[:3])
        more = f" and {len(report.gaps) - 3} more" if len(report.gaps) > 3 else ""
        reasons.append(
            GateReason(
                "coverage_gap",
                report.urn,
                f"{count(len(report.gaps), 'coverage gap')} (lineage stops before a dataset "
                f"at {shown}{more})",
            )
        )
    return reasons
