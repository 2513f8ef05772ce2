"""What a notification says, independent of where it goes: titles, wording, DataHub links."""

from __future__ import annotations

from urllib.parse import quote

from mlcopilot.model import Urn
from mlcopilot.names import short_name
from mlcopilot.outbox import GroupSnapshot, Member, Notification
from mlcopilot.wording import count

KIND: dict[str, str] = {
    "schema_drift": "Schema drift",
    "pii_exposure": "PII exposure",
    "stale_source": "Stale source",
    "deprecated_source": "Deprecated source",
}

WHY: dict[str, str] = {
    "schema_drift": (
        "The upstream schema no longer matches what these models were trained on: a feature "
        "pipeline may now read nulls, defaults or the wrong column without failing."
    ),
    "pii_exposure": (
        "Personal data reaches these models without a documented justification: a privacy "
        "and compliance risk that travels into every prediction and retraining."
    ),
    "stale_source": (
        "The source stopped refreshing within its SLA: these models train or predict on "
        "outdated data."
    ),
    "deprecated_source": (
        "A deprecated or removed source still feeds these models: when it is decommissioned "
        "their pipelines break or silently degrade."
    ),
}

_UI_PATHS = {
    "dataset": "dataset",
    "mlModel": "mlModels",
    "mlModelGroup": "mlModelGroup",
    "mlFeature": "features",
    "mlFeatureTable": "featureTables",
    "mlPrimaryKey": "mlPrimaryKeys",
    "dataJob": "tasks",
    "dataFlow": "pipelines",
}

MARKER_PREFIX = "mlcopilot:group="


def headline(notification: Notification) -> str:
    """One line: what happened, where, how wide (untrusted parts not yet escaped)."""
    group = notification.group
    kind = KIND.get(group.check, group.check)
    where = short_name(group.entity)
    models = len(group.models)
    fields = len({(m.model, m.field) for m in group.open_members or group.members})
    scope = f"{count(models, 'model')}, {count(fields, 'finding')}"
    if notification.action == "resolve":
        return f"Resolved: {kind} at {where} ({scope})"
    return f"{kind} at {where} ({scope})"


def change_word(member: Member) -> str:
    """``removed``, ``renamed from x``, ``type changed``, or the risk kind."""
    if member.change == "renamed" and member.previous_field:
        return "renamed"
    if member.change:
        return member.change.replace("_", " ")
    return KIND.get(member.check, member.check).lower()


def marker(group: GroupSnapshot, action: str = "open", seq: int = 0) -> str:
    """The hidden marker that identifies our issue or comment (written only by us)."""
    return f"<!-- {MARKER_PREFIX}{group.key} gen={group.generation} {action}={seq} v=1 -->"


def entity_url(base: str | None, urn: Urn, tab: str | None = None) -> str | None:
    """The DataHub UI page of ``urn`` under ``base`` (None without a configured UI URL)."""
    if not base:
        return None
    kind = urn.split(":", 3)[2] if urn.count(":") >= 3 else ""
    path = _UI_PATHS.get(kind)
    if path is None:
        return None
    url = f"{base.rstrip('/')}/{path}/{quote(urn, safe='')}"
    return f"{url}/{tab}" if tab else url
