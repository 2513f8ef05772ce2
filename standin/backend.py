"""The stand-in's state behind HTTP: the Lite store, the edge index and the GraphQL schema."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import MetadataChangeEventClass, MetadataChangeProposalClass
from graphql import GraphQLSchema

from standin.catalog import Catalog
from standin.incident_support import OLD_INCIDENT_ON
from standin.index import MAX_RELATIONS, EdgeIndex
from standin.store import LiteStore

Record = MetadataChangeProposalWrapper | MetadataChangeEventClass


def to_record(item: Any) -> Record:
    """An MCPW, an MCE, or a dict in DataHub's file-sink JSON form → something Lite stores."""
    if isinstance(item, (MetadataChangeProposalWrapper, MetadataChangeEventClass)):
        return item
    if isinstance(item, MetadataChangeProposalClass):
        wrapped = MetadataChangeProposalWrapper.try_from_mcpc(item)
        if wrapped is None:
            raise ValueError(f"Cannot store {item.aspectName} on {item.entityUrn} in Lite")
        return wrapped
    if isinstance(item, dict):
        obj = copy.deepcopy(item)  # from_obj rewrites the dict it is given
        if "proposedSnapshot" in obj:
            return MetadataChangeEventClass.from_obj(obj)
        if "aspect" in obj:
            return to_record(MetadataChangeProposalWrapper.from_obj(obj))
    raise TypeError(f"Not a metadata record: {type(item).__name__}")


class Backend:
    """Reads, writes and lineage limits shared by every request of one stand-in."""

    def __init__(self, lite_path: Path, schema: GraphQLSchema, *, durable: bool = True) -> None:
        self.store = LiteStore(lite_path, durable=durable)
        self.index = EdgeIndex()
        self.schema = schema
        self.max_relations = MAX_RELATIONS
        self.partial_lineage = False  # GMS errors past maxRelations unless partial results are on
        self.incident_types = OLD_INCIDENT_ON  # what incidentInfo.entities may name through the API
        for row in self.store.scan_latest():
            self.index.set_aspect(
                row.urn, row.name, row.value, row.system_metadata.get("lastObserved")
            )

    def catalog(self, actor: str) -> Catalog:
        return Catalog(self, actor)

    def write(self, items: Iterable[Any]) -> list[tuple[str, str]]:
        """Write records into Lite (new versions) and update the index for what changed."""
        touched = self.store.write(to_record(i) for i in items)
        self._reindex(touched)
        return touched

    def delete(self, urn: str, aspect: str | None = None) -> list[tuple[str, str]]:
        removed = self.store.delete(urn, aspect)
        self._reindex(removed)
        return removed

    def _reindex(self, pairs: list[tuple[str, str]]) -> None:
        for urn, name in pairs:
            row = self.store.get(urn, name, 0)
            if row is None:
                self.index.set_aspect(urn, name, None)
            else:
                self.index.set_aspect(urn, name, row.value, row.system_metadata.get("lastObserved"))

    def close(self) -> None:
        self.store.close()
