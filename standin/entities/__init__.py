"""GraphQL entity objects built from Lite aspects, one class per DataHub entity type.

Entity objects and the query modules under them (:mod:`standin.lineage`,
:mod:`standin.search`, ...) give urns where GraphQL expects an entity; the field resolver in
:mod:`standin.gql` turns those into objects with :func:`ref`.
"""

from __future__ import annotations

from standin.catalog import TYPES, Catalog
from standin.edges import entity_type
from standin.entities.base import Node
from standin.entities.datasets import Dataset, SchemaFieldEntity
from standin.entities.governance import Document, Incident, StructuredPropertyEntity
from standin.entities.ml import (
    DataFlow,
    DataJob,
    DataProcessInstance,
    MLFeature,
    MLFeatureTable,
    MLModel,
    MLModelGroup,
    MLPrimaryKey,
)
from standin.entities.quality import Assertion
from standin.entities.refs import (
    Container,
    CorpGroup,
    CorpUser,
    DataPlatform,
    DataPlatformInstance,
    DataTypeEntity,
    Domain,
    EntityTypeEntity,
    GlossaryNode,
    GlossaryTerm,
    OwnershipTypeEntity,
    Tag,
)

__all__ = ["Node", "entity", "ref"]

_CLASSES: dict[str, type[Node]] = {
    cls.typename: cls
    for cls in (
        DataPlatform,
        DataPlatformInstance,
        DataTypeEntity,
        EntityTypeEntity,
        OwnershipTypeEntity,
        Tag,
        GlossaryTerm,
        GlossaryNode,
        Domain,
        Container,
        CorpUser,
        CorpGroup,
        Dataset,
        SchemaFieldEntity,
        MLModel,
        MLModelGroup,
        MLFeature,
        MLPrimaryKey,
        MLFeatureTable,
        DataFlow,
        DataJob,
        DataProcessInstance,
        StructuredPropertyEntity,
        Incident,
        Document,
        Assertion,
    )
}


def ref(ctx: Catalog, urn: str | None) -> Node | None:
    """The GraphQL object for any urn, existing or not; None for types GraphQL does not model."""
    if not urn:
        return None
    typename = TYPES.get(entity_type(urn), (None, None))[0]
    if typename is None:
        return None
    cls = _CLASSES.get(typename)
    if cls is None:  # a modelled type without a builder: urn and type only
        node = Node(ctx, urn)
        node.typename = typename
        return node
    return cls(ctx, urn)


def entity(ctx: Catalog, urn: str) -> Node | None:
    """The entity if it exists (GMS batch loaders return null for missing urns)."""
    return ref(ctx, urn) if ctx.exists(urn) else None
