"""The proposals a write-back sends to DataHub: PATCH where people write too, UPSERT elsewhere.

``globalTags`` and ``structuredProperties`` are shared: people add tags in DataHub's UI and
other tools set properties, at any moment, including between the write-back's read and its
write. Sending the whole aspect would erase what they wrote in that window, so these aspects
get one PATCH each that carries only what the write-back changed: the entries added or
changed, and the entries removed, all named by their keys. GMS applies a patch to the value it
holds when the patch arrives, so whatever else is there by then stays.

The patch is built with the SDK's builder (``MetadataPatchProposal``, whose generic form is
accepted for every entity type: GMS applies it with ``GenericPatchTemplate``) and keys
entries as the SDK's tag and property helpers do, source first: ``/tags/<source>/<tag>``,
``/properties/<source>/<property>``. Two choices differ from those helpers, both for GMS's
sake:

- one key order for adds and removals, so each aspect is one PATCH: GMS releases that turn
  a batch's patches into upserts against the stored value would let a second patch of the
  same aspect in one batch undo the first;
- the source before the property urn (the SDK puts it after), so no path ends in an empty
  segment: ``/properties/<urn>/`` fails on GMS before datahub-project/datahub#17449 when the
  entity does not hold the property yet.

Everything else (incidents, documents, tag and property definitions) is wholly mlcopilot's,
on deterministic urns, and is sent whole as an UPSERT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_patch_builder import UNIT_SEPARATOR, MetadataPatchProposal
from datahub.metadata.schema_classes import MetadataChangeProposalClass

from mlcopilot.catalog import aspects as ax
from mlcopilot.errors import CatalogError
from mlcopilot.model import Urn

Proposal = MetadataChangeProposalWrapper | MetadataChangeProposalClass
"""What ``DataHubGraph.emit_mcps`` sends: an UPSERT wrapper or a PATCH proposal."""

PATCHED: Mapping[str, tuple[str, str]] = {
    "globalTags": ("tags", "tag"),
    "structuredProperties": ("properties", "propertyUrn"),
}
"""Aspects written by PATCH: aspect → (its keyed array, the key naming an entry)."""

_SOURCE_KEY = f"attribution{UNIT_SEPARATOR}source"

_Entry = tuple[str, str]
"""An entry's keys: (attribution source or "", tag or property urn)."""


class _KeyedPatch(MetadataPatchProposal):
    """A generic patch of keyed array entries (the SDK's builder, for any entity type)."""

    def put(self, aspect: str, field: str, id_key: str, key: _Entry, entry: Any) -> None:
        self._add_patch(aspect, "add", (field, *key), entry, self._keys(field, id_key))

    def drop(self, aspect: str, field: str, id_key: str, key: _Entry) -> None:
        self._add_patch(aspect, "remove", (field, *key), {}, self._keys(field, id_key))

    @staticmethod
    def _keys(field: str, id_key: str) -> dict[str, list[str]]:
        return {field: [_SOURCE_KEY, id_key]}


def proposals(
    pending: Mapping[tuple[Urn, str], ax.JsonObject],
    before: Mapping[tuple[Urn, str], ax.JsonObject | None],
) -> list[Proposal]:
    """The proposals that take DataHub from ``before`` to ``pending``, aspect by aspect.

    Args:
        pending: The value each changed aspect must end with, by (urn, aspect name).
        before: The value each of them had when it was read (None or absent: none). Only
            the patched aspects are looked up.

    Returns:
        An UPSERT per wholly owned aspect, a PATCH per shared one whose entries differ;
        nothing for a shared aspect that ends as it was read.

    Raises:
        CatalogError: when a value does not fit DataHub's model.
    """
    result: list[Proposal] = []
    for (urn, name), value in pending.items():
        try:
            if name in PATCHED:
                result += label_patch(urn, name, before.get((urn, name)), value)
            else:
                aspect = ax.from_json(name, value)
                result.append(MetadataChangeProposalWrapper(entityUrn=urn, aspect=aspect))
        except ax.TranslationError as exc:
            raise CatalogError(f"cannot write {name} of {urn}: {exc}") from exc
    return result


def label_patch(
    urn: Urn, name: str, before: ax.JsonObject | None, after: ax.JsonObject
) -> Sequence[MetadataChangeProposalClass]:
    """The PATCH of shared aspect ``name`` on ``urn`` from ``before`` to ``after``.

    Entries are compared in their normalized form, so an entry the write-back did not touch
    is never sent. Empty when nothing differs.

    Raises:
        ValueError: for an aspect not in :data:`PATCHED` (the SDK may also raise one of
            :data:`~mlcopilot.catalog.aspects.TranslationError` for a value that does not fit).
    """
    if name not in PATCHED:
        raise ValueError(f"{name} is not written by patch")
    field, id_key = PATCHED[name]
    old = _entries(name, field, id_key, before)
    new = _entries(name, field, id_key, after)
    patch = _KeyedPatch(urn)
    for key in old:
        if key not in new:
            patch.drop(name, field, id_key, key)
    for key, entry in new.items():
        if old.get(key) != entry:
            patch.put(name, field, id_key, key, entry)
    return patch.build()


def _entries(
    name: str, field: str, id_key: str, value: ax.JsonObject | None
) -> dict[_Entry, ax.JsonObject]:
    """The aspect's entries by key, normalized; entries with equal keys merge, as in GMS."""
    if value is None:
        return {}
    entries: dict[_Entry, ax.JsonObject] = {}
    for entry in ax.normalized(name, value).get(field) or []:
        attribution = entry.get("attribution")
        source = attribution.get("source") if isinstance(attribution, Mapping) else None
        key = (str(source or ""), str(entry.get(id_key) or ""))
        entries[key] = {**entries.get(key, {}), **entry}
    return entries
