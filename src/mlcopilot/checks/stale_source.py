"""Stale source: an upstream dataset not updated within its freshness SLA."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from pydantic import Field

from mlcopilot.config import PluginConfig
from mlcopilot.model import NOT_IN_CATALOG, CheckInfo, CheckOutcome, EntityType, Node, Severity
from mlcopilot.protocols import CheckContext

SLA_PROPERTY = "io.mlcopilot.freshnessSlaHours"
"""The dataset's structured property holding its freshness SLA in hours."""
SLA_CUSTOM_PROPERTY = "freshness_sla_hours"
"""The dataset's custom property (``datasetProperties.customProperties``) used otherwise."""

_PROPERTY_PREFIX = "urn:li:structuredProperty:"


class StaleSourceConfig(PluginConfig):
    """Settings of the ``stale_source`` check."""

    default_sla_hours: float | None = Field(default=None, gt=0)
    """The SLA of datasets that declare none; None checks only datasets that declare one."""


class StaleSource:
    """A dataset feeding the model has not been updated within its freshness SLA.

    What it flags: an upstream dataset whose last update (its latest `operation` or
    `lastModified` time in DataHub) is older than its freshness SLA. The SLA, in hours,
    is read from the dataset's structured property `io.mlcopilot.freshnessSlaHours`, else
    its custom property `freshness_sla_hours`, else the check's `default_sla_hours`
    setting (unset by default, so only datasets that declare an SLA are checked). Older than
    the SLA is medium severity; older than twice the SLA is high. A dataset with an SLA but
    no update time, or with an SLA that is not a positive number, is reported as unknown.

    Why it matters: a model scoring on stale inputs makes predictions about a world that
    has moved on, and nothing fails loudly; retraining on stale data bakes the gap in.

    How to fix: find out why the pipeline that writes the dataset stopped (failed job,
    paused schedule, upstream outage) and rerun it. If the dataset legitimately updates less
    often, raise its `io.mlcopilot.freshnessSlaHours`.
    """

    name: ClassVar[str] = "stale_source"
    info: ClassVar[CheckInfo] = CheckInfo(
        name="stale_source",
        title="Stale source",
        tag="urn:li:tag:mlcopilot-stale-source",
        tag_description="A source dataset missed its freshness SLA while feeding a model.",
        incident_type="FRESHNESS",
        why=(
            "The source stopped refreshing within its SLA: these models train or predict on "
            "outdated data."
        ),
        action=(
            "Find out why the source stopped refreshing (failed job, paused ingestion) and "
            "re-run it; if the SLA is wrong, change `io.mlcopilot.freshnessSlaHours` on the "
            "dataset."
        ),
    )
    # Annotated with the base type: a Protocol's ClassVar members are invariant.
    config_model: ClassVar[type[PluginConfig]] = StaleSourceConfig

    def __init__(self, config: StaleSourceConfig) -> None:
        self.config = config

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """A finding when the dataset is older than its freshness SLA."""
        if node.entity_type is not EntityType.DATASET:
            return CheckOutcome()
        if not node.exists:
            return NOT_IN_CATALOG
        declared = self._declared_sla(node)
        if declared is None:
            return CheckOutcome()
        raw, where = declared
        sla_hours = _positive_number(raw)
        if sla_hours is None:
            return CheckOutcome(unknown=f"invalid freshness SLA {str(raw)!r} in {where}")
        if node.last_updated is None:
            return CheckOutcome(unknown="no operation or lastModified timestamp")

        last_updated = _as_utc(node.last_updated)
        age = ctx.now - last_updated
        sla = timedelta(hours=sla_hours)
        if age <= sla:
            return CheckOutcome()
        # Absolute times only: the message is written back to DataHub, and a relative age
        # would rewrite the incident on every scan.
        overdue_since = last_updated + sla
        message = (
            f"last updated {_format_time(last_updated)}; its freshness SLA is "
            f"{_format_hours(sla_hours)}, so it has been overdue since "
            f"{_format_time(overdue_since)}"
        )
        finding = ctx.finding(
            self.name,
            Severity.HIGH if age > 2 * sla else Severity.MEDIUM,
            node,
            None,
            message,
            evidence={
                "last_updated": last_updated.isoformat(),
                "sla_hours": sla_hours,
                "overdue_since": overdue_since.isoformat(),
                "sla_source": where,
            },
        )
        return CheckOutcome(findings=(finding,))

    def _declared_sla(self, node: Node) -> tuple[str | float, str] | None:
        """The raw SLA and where it came from, by precedence; None when none applies."""
        values = node.structured_properties.get(SLA_PROPERTY)
        if not values:
            values = node.structured_properties.get(_PROPERTY_PREFIX + SLA_PROPERTY)
        if values:
            return values[0], f"structured property {SLA_PROPERTY}"
        if SLA_CUSTOM_PROPERTY in node.custom_properties:
            return node.custom_properties[SLA_CUSTOM_PROPERTY], (
                f"custom property {SLA_CUSTOM_PROPERTY}"
            )
        if self.config.default_sla_hours is not None:
            return self.config.default_sla_hours, "config default_sla_hours"
        return None


def _positive_number(raw: str | float) -> float | None:
    """``raw`` as a finite number of hours above zero, or None."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _as_utc(when: datetime) -> datetime:
    """``when`` in UTC; a naive time is taken to be UTC already."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _format_time(when: datetime) -> str:
    """``2026-11-27 09:00 UTC``."""
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _format_hours(hours: float) -> str:
    """``24 hours``, ``1 hour``, ``1.5 hours``."""
    text = f"{hours:g}"
    return f"{text} hour" if text == "1" else f"{text} hours"


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"
