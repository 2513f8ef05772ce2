"""Schemas by content: the JSON text a schema is stored as, and the digest it is kept under.

The store keeps each distinct baseline schema once, under the digest of its text, and a
baseline names the digest: an estate's models share their upstream datasets, so a million
baselines over a hundred thousand datasets hold at most a hundred thousand schemas (fewer
where datasets share a shape). A scan hands the store the datasets'
current schemas (:class:`CurrentSchemas`); a stored baseline whose digest is its dataset's
current one is that schema, read back without fetching or decoding its text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mlcopilot.model.catalog import Schema, SchemaField, Urn

_COLUMN_ATTRIBUTES = tuple(f.name for f in dataclasses.fields(SchemaField))
"""A column's attributes in declared order: what its JSON holds, a new one included."""


def schema_text(schema: Schema) -> str:
    """``schema`` as the JSON text the store keeps: each column's attributes in order.

    Sets (tags, terms) are sorted lists: the same schema always gives the same text, so
    equal schemas share one digest.
    """
    return json.dumps({"fields": [_column(f) for f in schema.fields]})


def _column(field: SchemaField) -> dict[str, Any]:
    return {name: _plain(getattr(field, name)) for name in _COLUMN_ATTRIBUTES}


def _plain(value: Any) -> Any:
    return sorted(value) if isinstance(value, frozenset) else value


def schema_digest(text: str) -> str:
    """The digest a stored schema text is kept under: its BLAKE2b-128, as 32 hex digits."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class CurrentSchemas:
    """Datasets' schemas now, each one's digest made when first asked (then kept)."""

    __slots__ = ("_digests", "_schemas")

    def __init__(self, schemas: Mapping[Urn, Schema]) -> None:
        self._schemas = schemas
        self._digests: dict[Urn, str] = {}

    def get(self, dataset: Urn) -> Schema | None:
        """The current schema of ``dataset``, if the scan has one."""
        return self._schemas.get(dataset)

    def digest(self, dataset: Urn) -> str | None:
        """The digest of :meth:`get`'s schema as stored (:func:`schema_digest`), if any."""
        known = self._digests.get(dataset)
        if known is None:
            schema = self._schemas.get(dataset)
            if schema is None:
                return None
            known = self._digests[dataset] = schema_digest(schema_text(schema))
        return known
