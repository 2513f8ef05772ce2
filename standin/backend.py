"""The stand-in's state behind HTTP: the Lite store, the edge index and the GraphQL schema."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import MetadataChangeEventClass, MetadataChangeProposalClass
from graphql import GraphQLSchema

from standin.catalog import Catalog
from standin.incident_support import OLD_INCIDENT_ON
from standin.index import LINEAGE_TTL_S, EdgeIndex, GraphLimits, LineageCache
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


SEARCH_LAG_S = 90.0
"""How long an entity written through the API takes to reach the search index: the MCL
consumer indexes writes asynchronously, and quickstart v1.5.0.6 was measured at over 90 s
(datahub issue #18809). Aspect reads, ``relationships`` and the graph walk see it at once."""


class Backend:
    """Reads, writes and lineage limits shared by every request of one stand-in."""

    def __init__(self, lite_path: Path, schema: GraphQLSchema, *, durable: bool = True) -> None:
        self.store = LiteStore(lite_path, durable=durable)
        self.index = EdgeIndex()
        self.schema = schema
        self.graph = GraphLimits()  # elasticsearch.search.graph.*: relation cap, timeout
        self.lineage_cache = LineageCache()
        self.lineage_ttl_s = LINEAGE_TTL_S
        self.search_lag_s = SEARCH_LAG_S
        self.clock_offset_s = 0.0  # added to the wall clock: the stand-in's own time
        self.incident_types = OLD_INCIDENT_ON  # what incidentInfo.entities may name through the API
        # Why writes are refused (None: they are not): a stand-in of several processes, each
        # with its own index of the file, would serve a write through one and not the others.
        self.read_only: str | None = None
        for row in self.store.scan_latest():
            self.index.set_aspect(
                row.urn, row.name, row.value, row.system_metadata.get("lastObserved")
            )

    # GMS's impact-analysis limits, by the names the stand-in has always had for them.
    @property
    def max_relations(self) -> int:
        return self.graph.max_relations

    @max_relations.setter
    def max_relations(self, value: int) -> None:
        self.graph.max_relations = value

    @property
    def partial_lineage(self) -> bool:
        """``impact.partialResults``: GMS errors past a limit unless partial results are on."""
        return self.graph.partial

    @partial_lineage.setter
    def partial_lineage(self, value: bool) -> None:
        self.graph.partial = value

    def now(self) -> float:
        """The stand-in's clock (epoch seconds): the wall clock plus ``clock_offset_s``."""
        return time.time() + self.clock_offset_s

    def catalog(self, actor: str) -> Catalog:
        return Catalog(self, actor)

    def write(self, items: Iterable[Any], *, settled: bool = False) -> list[tuple[str, str]]:
        """Write records into Lite (new versions) and update the index for what changed.

        An entity written for the first time reaches the search index ``search_lag_s`` later;
        ``settled=True`` writes as an ingestion that finished long ago (searchable at once).
        """
        self._writable()
        touched = self.store.write(to_record(i) for i in items)
        # The index has not seen this write yet: what it does not hold is new.
        new = set() if settled else {u for u, _ in touched if not self.index.exists(u)}
        self._reindex(touched)
        if new and self.search_lag_s > 0:
            until = self.now() + self.search_lag_s
            for urn in sorted(new):
                if self.index.exists(urn):
                    self.index.hold_from_search(urn, until)
        return touched

    def delete(self, urn: str, aspect: str | None = None) -> list[tuple[str, str]]:
        self._writable()
        removed = self.store.delete(urn, aspect)
        self._reindex(removed)
        return removed

    def _writable(self) -> None:
        if self.read_only is not None:
            raise PermissionError(f"this stand-in is read-only: {self.read_only}")

    def _reindex(self, pairs: list[tuple[str, str]]) -> None:
        for urn, name in pairs:
            row = self.store.get(urn, name, 0)
            if row is None:
                self.index.set_aspect(urn, name, None)
            else:
                self.index.set_aspect(urn, name, row.value, row.system_metadata.get("lastObserved"))

    def close(self) -> None:
        self.store.close()
