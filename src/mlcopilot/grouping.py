"""One root cause, one notification: which group an incident belongs to.

The group key is a hash of the risk kind and the upstream entity where the risk sits — never
of the model or the field. So an upstream table that drops columns feeding three models is
one group (one GitHub issue, one Slack thread) listing every model and field, and not one
notification per model or per column (Alertmanager's ``group_by``).

Inhibition: schema drift and staleness on an upstream that is itself deprecated or removed
are symptoms of that deprecation, so they fold into the deprecation's group (Alertmanager's
``inhibit_rules``) instead of notifying on their own.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from mlcopilot.model import CheckName, Incident, Urn

INHIBITED_BY_DEPRECATION: frozenset[str] = frozenset({"schema_drift", "stale_source"})
"""Risk kinds that fold into a deprecation group on the same entity."""


def group_key(check: str, entity: Urn) -> str:
    """The stable key of the group of ``check`` findings at ``entity`` (16 hex digits).

    The urn is NFC-normalised, so the same entity spelt with composed or decomposed unicode
    is one group.
    """
    text = "\x1f".join(("mlcopilot-group", "v1", check, unicodedata.normalize("NFC", entity)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def group_of(incident: Incident, deprecated: AbstractSet[Urn]) -> tuple[str, CheckName, Urn]:
    """The group ``(key, check, entity)`` of ``incident``.

    Args:
        incident: The incident (generation) being opened.
        deprecated: Entities that currently have an open deprecation incident.
    """
    if incident.check in INHIBITED_BY_DEPRECATION and incident.entity in deprecated:
        return group_key("deprecated_source", incident.entity), "deprecated_source", incident.entity
    return group_key(incident.check, incident.entity), incident.check, incident.entity


def member_state(severity: str, change: str | None, previous_field: str | None) -> str:
    """What about a member makes a notification worth sending when it changes."""
    return f"{severity}|{change or ''}|{previous_field or ''}"


def diff(
    before: Mapping[str, str], after: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Members ``(added, cleared, changed)`` between two ``id -> member_state`` maps."""
    added = tuple(sorted(set(after) - set(before)))
    cleared = tuple(sorted(set(before) - set(after)))
    changed = tuple(sorted(k for k in set(before) & set(after) if before[k] != after[k]))
    return added, cleared, changed


def deprecated_entities(incidents: Iterable[Incident]) -> frozenset[Urn]:
    """Entities with an open deprecation incident among ``incidents``."""
    return frozenset(i.entity for i in incidents if i.check == "deprecated_source" and i.is_open)
