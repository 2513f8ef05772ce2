"""Request-scoped reads: aspects cached per urn for one request, plus urn/type helpers.

The reader holds urns and aspect JSON only: the GraphQL objects built over it live in
:mod:`standin.entities`, and what it reads from is any :class:`Source` (the stand-in's
:class:`standin.backend.Backend`, which hands out one ``Catalog`` per request).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, Protocol

from datahub.metadata.urns import Urn

from standin.edges import entity_type
from standin.index import EdgeIndex, GraphLimits, LineageCache
from standin.store import AspectRow, LiteStore

# entity type (as in urns) -> (GraphQL __typename, EntityType enum value)
TYPES: dict[str, tuple[str, str]] = {
    "dataset": ("Dataset", "DATASET"),
    "mlModel": ("MLModel", "MLMODEL"),
    "mlModelGroup": ("MLModelGroup", "MLMODEL_GROUP"),
    "mlFeature": ("MLFeature", "MLFEATURE"),
    "mlFeatureTable": ("MLFeatureTable", "MLFEATURE_TABLE"),
    "mlPrimaryKey": ("MLPrimaryKey", "MLPRIMARY_KEY"),
    "dataJob": ("DataJob", "DATA_JOB"),
    "dataFlow": ("DataFlow", "DATA_FLOW"),
    "dataProcessInstance": ("DataProcessInstance", "DATA_PROCESS_INSTANCE"),
    "tag": ("Tag", "TAG"),
    "structuredProperty": ("StructuredPropertyEntity", "STRUCTURED_PROPERTY"),
    "incident": ("Incident", "INCIDENT"),
    "document": ("Document", "DOCUMENT"),
    "corpuser": ("CorpUser", "CORP_USER"),
    "corpGroup": ("CorpGroup", "CORP_GROUP"),
    "schemaField": ("SchemaFieldEntity", "SCHEMA_FIELD"),
    "dataPlatform": ("DataPlatform", "DATA_PLATFORM"),
    "dataPlatformInstance": ("DataPlatformInstance", "DATA_PLATFORM_INSTANCE"),
    "glossaryTerm": ("GlossaryTerm", "GLOSSARY_TERM"),
    "glossaryNode": ("GlossaryNode", "GLOSSARY_NODE"),
    "container": ("Container", "CONTAINER"),
    "domain": ("Domain", "DOMAIN"),
    "chart": ("Chart", "CHART"),
    "dashboard": ("Dashboard", "DASHBOARD"),
    "dataProduct": ("DataProduct", "DATA_PRODUCT"),
    "dataType": ("DataTypeEntity", "DATA_TYPE"),
    "entityType": ("EntityTypeEntity", "ENTITY_TYPE"),
    "ownershipType": ("OwnershipTypeEntity", "CUSTOM_OWNERSHIP_TYPE"),
    "query": ("QueryEntity", "QUERY"),
    "test": ("Test", "TEST"),
    "assertion": ("Assertion", "ASSERTION"),
    "notebook": ("Notebook", "NOTEBOOK"),
    "application": ("Application", "APPLICATION"),
}
ENUM_TO_TYPE = {enum: name for name, (_, enum) in TYPES.items()}

# What searchAcrossEntities covers when no types are given (GMS's SEARCHABLE_ENTITY_TYPES).
SEARCHABLE = (
    "dataset",
    "dashboard",
    "chart",
    "mlModel",
    "mlModelGroup",
    "mlFeatureTable",
    "mlFeature",
    "mlPrimaryKey",
    "dataFlow",
    "dataJob",
    "glossaryTerm",
    "glossaryNode",
    "tag",
    "corpuser",
    "corpGroup",
    "container",
    "domain",
    "dataProduct",
    "notebook",
    "document",
    "application",
)


def modelled(urn: str) -> bool:
    """Whether GraphQL maps ``urn``'s entity type (GMS resolves other urns to null)."""
    return entity_type(urn) in TYPES


def type_enum(urn: str) -> str:
    return TYPES.get(entity_type(urn), ("", "OTHER"))[1]


def to_entity_type(value: str) -> str:
    """A GraphQL ``EntityType`` (``DATASET``) or an entity name (``dataset``) → ``dataset``."""
    if value in ENUM_TO_TYPE:
        return ENUM_TO_TYPE[value]
    lowered = {k.lower(): k for k in TYPES}
    return lowered.get(value.lower(), value)


@functools.lru_cache(maxsize=65536)
def key_of(urn: str) -> dict[str, Any]:
    """The entity's key aspect as JSON, parsed from the urn ({} when it does not parse)."""
    try:
        key: dict[str, Any] = Urn.from_string(urn).to_key_aspect().to_obj()  # type: ignore[attr-defined]
    except Exception:  # a malformed urn still gets an entity, just without key fields
        return {}
    return key


def key_aspect_name(urn: str) -> str | None:
    try:
        name: str = Urn.from_string(urn).to_key_aspect().get_aspect_name()  # type: ignore[attr-defined]
    except Exception:
        return None
    return name


class Source(Protocol):
    """What a :class:`Catalog` reads from and writes through."""

    @property
    def store(self) -> LiteStore: ...

    @property
    def index(self) -> EdgeIndex: ...

    @property
    def graph(self) -> GraphLimits: ...

    @property
    def lineage_cache(self) -> LineageCache: ...

    @property
    def lineage_ttl_s(self) -> float: ...

    def now(self) -> float: ...

    @property
    def incident_types(self) -> frozenset[str]: ...

    def write(self, items: Iterable[Any]) -> list[tuple[str, str]]: ...


class Catalog:
    """What one request sees: Lite rows through a per-request cache, and the edge index."""

    def __init__(self, backend: Source, actor: str) -> None:
        self.backend = backend
        self.index = backend.index
        self.actor = actor
        self._rows: dict[str, dict[str, AspectRow]] = {}

    def rows(self, urn: str) -> dict[str, AspectRow]:
        if urn not in self._rows:
            self._rows[urn] = self.backend.store.latest(urn)
        return self._rows[urn]

    def aspect(self, urn: str, name: str) -> dict[str, Any] | None:
        row = self.rows(urn).get(name)
        return row.value if row else None

    def exists(self, urn: str) -> bool:
        return self.index.exists(urn)

    def searchable(self, urn: str) -> bool:
        """Whether the search index has ``urn`` yet (it lags first writes; see Backend)."""
        return self.index.searchable(urn, self.backend.now())

    def write(self, mcps: list[Any]) -> None:
        """Write through the backend and forget what this request cached for those urns."""
        for urn, _ in self.backend.write(mcps):
            self._rows.pop(urn, None)
