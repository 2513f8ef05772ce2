"""How to reach owners, read from DataHub GMS: GraphQL ``CorpUser`` and ``CorpGroup``, batched.

One ``entities(urns:)`` query per batch of owners, the batches concurrent on the catalog's
workers; each answer is the owner's ``editableProperties`` (GMS maps them from
``corpUserEditableInfo`` / ``corpGroupEditableInfo``) and ``properties`` (from
``corpUserInfo`` / ``corpGroupInfo``), which carry the aspects' own field names, so
:func:`~mlcopilot.model.contact_from_info` reads them exactly as it reads DataHub Lite's
aspects. GMS answers null for an urn it holds nothing on: that owner is absent. Every request
goes through :class:`~mlcopilot.catalog.datahub.client.GmsClient`, so it is held to the call's
own deadline and to the scan's (:meth:`DataHubCatalog.walk_until
<mlcopilot.catalog.datahub.catalog.DataHubCatalog.walk_until>`).

As in :mod:`.queries`, no field is newer than DataHub 1.0, so the document works on every
server the backend supports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from mlcopilot.catalog.datahub.client import GmsClient
from mlcopilot.model import Contact, Urn, contact_from_info, contact_kind

CONTACTS = """
query mlcopilotContacts($urns: [String!]!) {
  entities(urns: $urns) {
    urn
    type
    ... on CorpUser {
      username
      editableProperties { displayName slack email }
      properties { displayName fullName email }
    }
    ... on CorpGroup {
      name
      editableProperties { slack email }
      properties { displayName email slack }
    }
  }
}
"""
"""One batch of owners: what their users' and groups' editable and ingested info say."""

DOCUMENTS: dict[str, str] = {"mlcopilotContacts": CONTACTS}
"""Every document by operation name (what the tests validate against the SDL)."""

_Found = dict[Urn, Contact]
Runner = Callable[[Sequence[Callable[[], _Found]]], list[_Found]]
"""Runs tasks (at most the catalog's ``max_workers`` at once); results in task order."""


def read_contacts(
    client: GmsClient, owners: Sequence[Urn], *, batch_size: int, run: Runner
) -> dict[Urn, Contact]:
    """The contact of each owner GMS holds, in the order asked; the others absent.

    Urns of no ``corpuser`` or ``corpGroup`` are not asked for.
    """
    wanted = [urn for urn in dict.fromkeys(owners) if contact_kind(urn) is not None]
    tasks = [
        partial(_batch, client, wanted[start : start + batch_size])
        for start in range(0, len(wanted), batch_size)
    ]
    found: _Found = {}
    for part in run(tasks):
        found.update(part)
    return {urn: found[urn] for urn in wanted if urn in found}


def _batch(client: GmsClient, urns: Sequence[Urn]) -> _Found:
    data = client.graphql("mlcopilotContacts", CONTACTS, {"urns": list(urns)})
    asked = set(urns)
    found: _Found = {}
    for entity in data.get("entities") or []:
        if not isinstance(entity, Mapping) or entity.get("urn") not in asked:
            continue  # null: GMS holds nothing on that owner
        urn = str(entity["urn"])
        key = entity.get("username") if entity.get("type") == "CORP_USER" else entity.get("name")
        contact = contact_from_info(
            urn,
            _object(entity.get("editableProperties")),
            _object(entity.get("properties")),
            key_name=key if isinstance(key, str) else None,
        )
        if contact is not None:
            found[urn] = contact
    return found


def _object(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


__all__ = ["CONTACTS", "DOCUMENTS", "Runner", "read_contacts"]
