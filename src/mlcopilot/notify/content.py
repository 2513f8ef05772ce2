"""What a notification says, independent of where it goes: titles, wording, DataHub links."""

from __future__ import annotations

from functools import cache
from urllib.parse import quote

from mlcopilot.incidents.payload import GroupSnapshot, Member, Notification
from mlcopilot.model import CheckInfo, Urn
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count


def info(group: GroupSnapshot, check: str | None = None) -> CheckInfo:
    """The info of ``check`` (default: the group's own) as the row carries it.

    A row planned before rows carried infos falls back to the built-in check of that name;
    a check known to neither gets the info its name implies.
    """
    name = check or group.check
    return group.infos.get(name) or _builtin_infos().get(name) or CheckInfo.generic(name)


@cache
def _builtin_infos() -> dict[str, CheckInfo]:
    # Imported here: only rows from before infos were copied need it.
    from mlcopilot.checks import builtin_infos

    return builtin_infos()


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
    kind = info(group).title
    where = short_name(group.entity)
    models = len(group.models)
    fields = len({(m.model, m.field) for m in group.open_members or group.members})
    scope = f"{count(models, 'model')}, {count(fields, 'finding')}"
    if notification.action == "resolve":
        return f"Resolved: {kind} at {where} ({scope})"
    return f"{kind} at {where} ({scope})"


def change_word(group: GroupSnapshot, member: Member) -> str:
    """``removed``, ``renamed from x``, ``type changed``, or the risk kind."""
    if member.change == "renamed" and member.previous_field:
        return "renamed"
    if member.change:
        return member.change.replace("_", " ")
    return info(group, member.check).title.lower()


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
