"""One root cause, one notification: which group an incident belongs to.

The group key is a hash of the risk kind and the upstream entity where the risk sits — never
of the model or the field. So an upstream table that drops columns feeding three models is
one group (one GitHub issue, one Slack thread) listing every model and field, and not one
notification per model or per column (Alertmanager's ``group_by``).

Inhibition: a check's findings can be symptoms of another's at the same entity — schema drift
and staleness on an upstream that is itself deprecated or removed are symptoms of that
deprecation — so they fold into that check's group (Alertmanager's ``inhibit_rules``) instead
of notifying on their own. Which check folds in which is its own ``CheckInfo.folds_in``.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from mlcopilot.model import CheckInfo, Incident, Urn


def inhibitors(infos: Mapping[str, CheckInfo]) -> dict[str, tuple[str, ...]]:
    """Check name → the checks that fold it in (sorted), from each check's ``folds_in``."""
    folding: dict[str, list[str]] = {}
    for name in sorted(infos):
        for symptom in infos[name].folds_in:
            folding.setdefault(symptom, []).append(name)
    return {symptom: tuple(names) for symptom, names in folding.items()}


def group_key(check: str, entity: Urn) -> str:
    """The stable key of the group of ``check`` findings at ``entity`` (16 hex digits).

    The urn is NFC-normalised, so the same entity spelt with composed or decomposed unicode
    is one group.
    """
    text = "\x1f".join(("mlcopilot-group", "v1", check, unicodedata.normalize("NFC", entity)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def group_of(
    incident: Incident,
    open_at: Mapping[Urn, AbstractSet[str]],
    folded_by: Mapping[str, Sequence[str]],
) -> tuple[str, str, Urn]:
    """The group ``(key, check, entity)`` of ``incident``.

    Args:
        incident: The incident (generation) being opened.
        open_at: Entity → the checks that fold others in and have an open incident there.
        folded_by: Check name → the checks that fold it in (:func:`inhibitors`).
    """
    here = open_at.get(incident.entity, frozenset())
    for root in folded_by.get(incident.check, ()):
        if root in here:
            return group_key(root, incident.entity), root, incident.entity
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
