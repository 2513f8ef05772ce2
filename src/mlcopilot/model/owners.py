"""How to reach an entity's owners: DataHub's users and groups, as routing needs them.

DataHub names owners in ``ownership`` (:attr:`~mlcopilot.model.Node.owners`) and keeps how to
reach them on the owners themselves: a user's ``corpUserEditableInfo`` (what people edit in
DataHub's UI: ``displayName``, ``slack``, ``email``) over its ``corpUserInfo`` (what ingestion
from an identity provider wrote: ``displayName``, ``fullName``, ``email``); a group's
``corpGroupEditableInfo`` (``slack``, ``email``) over its ``corpGroupInfo`` (``displayName``,
``email``, ``slack``). GraphQL's ``editableProperties`` and ``properties`` of ``CorpUser`` and
``CorpGroup`` carry the same field names, so :func:`contact_from_info` reads either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mlcopilot.model.catalog import Urn
from mlcopilot.text.names import short_name

ContactKind = Literal["user", "group"]
"""A ``corpuser`` or a ``corpGroup``: the two kinds of owner DataHub's ``Owner.owner`` allows."""

CONTACT_ASPECTS: Mapping[ContactKind, tuple[str, str]] = {
    "user": ("corpUserEditableInfo", "corpUserInfo"),
    "group": ("corpGroupEditableInfo", "corpGroupInfo"),
}
"""Per kind: the aspect people edit, then the one ingestion writes (the first says first)."""

_USER_PREFIX = "urn:li:corpuser:"
_GROUP_PREFIX = "urn:li:corpGroup:"
_MEMBER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
"""A Slack member id: ``U…``, or ``W…`` for an Enterprise Grid user."""


@dataclass(frozen=True, slots=True)
class Contact:
    """How to reach one owner, as the catalog records it.

    ``name`` is never empty: the display name set in DataHub, else the ingested display or
    full name, else the username or group id of the urn. ``slack`` is as DataHub holds it
    (a user's member id or handle, a group's channel id or ``#name``) and ``email`` likewise,
    each stripped; None when DataHub has none.
    """

    urn: Urn
    kind: ContactKind
    name: str
    slack: str | None = None
    email: str | None = None

    @property
    def slack_member_id(self) -> str | None:
        """The Slack member id (``U…``/``W…``) a message can mention; None for anything else."""
        if self.slack is not None and _MEMBER_ID.match(self.slack):
            return self.slack
        return None


def contact_kind(urn: Urn) -> ContactKind | None:
    """``user`` for a ``corpuser`` urn, ``group`` for a ``corpGroup`` one, else None."""
    if urn.startswith(_USER_PREFIX) and len(urn) > len(_USER_PREFIX):
        return "user"
    if urn.startswith(_GROUP_PREFIX) and len(urn) > len(_GROUP_PREFIX):
        return "group"
    return None


def contact_from_info(
    urn: Urn,
    editable: Mapping[str, Any] | None,
    info: Mapping[str, Any] | None,
    *,
    key_name: str | None = None,
) -> Contact | None:
    """The contact of owner ``urn`` from what DataHub holds on it; None if not an owner urn.

    Args:
        urn: A ``corpuser`` or ``corpGroup`` urn.
        editable: ``corp{User,Group}EditableInfo`` (or GraphQL's ``editableProperties``).
        info: ``corp{User,Group}Info`` (or GraphQL's ``properties``).
        key_name: The username or group name of the entity's key, when the catalog says it;
            else it is read from the urn.
    """
    kind = contact_kind(urn)
    if kind is None:
        return None
    name = _first(editable, info, field="displayName") or _text((info or {}).get("fullName"))
    return Contact(
        urn=urn,
        kind=kind,
        name=name or _text(key_name) or short_name(urn),
        slack=_first(editable, info, field="slack"),
        email=_first(editable, info, field="email"),
    )


def contact_from_aspects(urn: Urn, aspects: Mapping[str, Mapping[str, Any]]) -> Contact | None:
    """:func:`contact_from_info` of the owner's aspects, by name (Lite's or OpenAPI's JSON)."""
    kind = contact_kind(urn)
    if kind is None:
        return None
    editable, info = CONTACT_ASPECTS[kind]
    return contact_from_info(urn, aspects.get(editable), aspects.get(info))


def _first(*aspects: Mapping[str, Any] | None, field: str) -> str | None:
    for aspect in aspects:
        found = _text((aspect or {}).get(field))
        if found is not None:
            return found
    return None


def _text(value: object) -> str | None:
    """A non-blank string, stripped (a one-key Avro union ``{"string": …}`` unwrapped)."""
    if isinstance(value, Mapping) and len(value) == 1:
        value = next(iter(value.values()))
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None
