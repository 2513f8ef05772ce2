"""Deprecated source: an upstream entity deprecated or soft-deleted in DataHub."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    JSON,
    NOT_IN_CATALOG,
    CheckInfo,
    CheckOutcome,
    Deprecation,
    EntityType,
    Node,
    Severity,
    short_name,
)
from mlcopilot.protocols import CheckContext

_NOTHING = CheckOutcome()
"""Nothing found, nothing unknown: one object for every node a check has nothing on."""


class DeprecatedSourceConfig(PluginConfig):
    """Settings of the ``deprecated_source`` check (it has none yet)."""


class DeprecatedSource:
    """Something upstream of the model is deprecated or soft-deleted in DataHub.

    What it flags: any upstream entity (dataset, feature, feature table, job, ...) that its
    owners have marked deprecated, or that has been soft-deleted, yet still feeds the model.

    - Soft-deleted (`status.removed`): critical. The entity is gone from the catalog's
      point of view, so nobody is maintaining what the model still depends on.
    - Deprecated with a decommission date that has passed: high. It may disappear at any
      time.
    - Deprecated otherwise: medium, with the owners' note, the replacement if they named
      one and the decommission date if they set one.

    Why it matters: deprecated data stops being fixed, backfilled and monitored long before
    it stops existing, and the day it is switched off the model's pipeline breaks.

    How to fix: move the model's features to the replacement (see the deprecation note in
    DataHub), retrain, and remove the old source from the model's lineage. If the
    deprecation is a mistake, ask the owners to lift it.
    """

    name: ClassVar[str] = "deprecated_source"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="deprecated_source",
        title="Deprecated source",
        tag="urn:li:tag:mlcopilot-deprecated-source",
        tag_description="A deprecated dataset still feeds an ML model.",
        incident_type="CUSTOM",
        custom_incident_type="DEPRECATED_SOURCE",
        why=(
            "A deprecated or removed source still feeds these models: when it is "
            "decommissioned their pipelines break or silently degrade."
        ),
        action=(
            "Move the model's pipeline to the replacement source before the decommission "
            "date, then retrain and redeploy."
        ),
        # Drift and staleness of a source that is going away are symptoms of that.
        folds_in=frozenset({"schema_drift", "stale_source"}),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = DeprecatedSourceConfig

    def __init__(self, config: DeprecatedSourceConfig) -> None:
        self.config = config

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """A finding when the node is soft-deleted or deprecated."""
        if node.entity_type is EntityType.ML_MODEL:
            return _NOTHING
        if not node.exists:
            return NOT_IN_CATALOG
        if node.removed:
            severity = Severity.CRITICAL
            message = "soft-deleted in DataHub (status.removed) but still upstream of the model"
        elif node.deprecation is not None:
            severity, message = _deprecated(node.deprecation, ctx.now)
        else:
            return _NOTHING
        evidence = _evidence(node.deprecation)
        finding = ctx.finding(self.name, severity, node, None, message, evidence=evidence)
        return CheckOutcome(findings=(finding,))


def _deprecated(deprecation: Deprecation, now: datetime) -> tuple[Severity, str]:
    """The severity and message for a deprecated (not deleted) entity."""
    details = []
    if deprecation.note.strip():
        details.append(f'note: "{" ".join(deprecation.note.split())}"')
    if deprecation.replacement:
        details.append(f"replacement: {short_name(deprecation.replacement)}")
    tail = f" ({'; '.join(details)})" if details else ""

    when = deprecation.decommission_time
    if when is None:
        return Severity.MEDIUM, f"deprecated in DataHub{tail}, with no decommission date"
    when = _as_utc(when)
    # Dates, never "in N days": the message is written back to DataHub, and a countdown would
    # rewrite the incident and its document (a new aspect version) on every day's scan.
    if when < now:
        return Severity.HIGH, (
            f"deprecated in DataHub and was to be decommissioned on {_format_date(when)}{tail}"
        )
    return Severity.MEDIUM, (
        f"deprecated in DataHub{tail}; to be decommissioned on {_format_date(when)}"
    )


def _evidence(deprecation: Deprecation | None) -> dict[str, JSON]:
    """The deprecation details (none for a soft-deleted entity that is not deprecated)."""
    if deprecation is None:
        return {}
    # No days-left count, for the reason the message has none: the report's `now` and this
    # date give it.
    when = deprecation.decommission_time
    return {
        "note": deprecation.note,
        "replacement": deprecation.replacement,
        "decommission_time": _as_utc(when).isoformat() if when is not None else None,
    }


def _format_date(when: datetime) -> str:
    """``2026-12-31``, or ``2026-12-31 12:00 UTC`` when the time of day matters."""
    if when.time() == datetime.min.time():
        return when.date().isoformat()
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _as_utc(when: datetime) -> datetime:
    """``when`` in UTC; a naive time is taken to be UTC already."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
