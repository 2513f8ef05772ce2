"""Graph edges from aspect JSON, derived the way GMS's graph index derives them.

GMS writes one edge per ``@Relationship`` annotation value (``GraphIndexUtils``); only those
marked ``isLineage`` make lineage (``LineageRegistry``), and ``isUpstream: false`` flips the
lineage direction. The annotations are read from acryl-datahub's generated Avro schemas, so
the stand-in follows the same model as the client, not a hand-written table. Two special cases
are copied from ``GraphIndexUtils.getEdgesAndRelationshipTypesFromAspect``: fine-grained
lineage (``upstreamLineage`` / ``dataJobInputOutput``) adds schemaField → schemaField
``DownstreamOf`` edges, and ``inputFields`` adds chart-field → dataset-field edges.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import avro.schema
from datahub.emitter.aspect import ASPECT_MAP

DOWNSTREAM_OF = "DownstreamOf"


def entity_type(urn: str) -> str:
    """``urn:li:<type>:...`` → ``<type>``."""
    parts = urn.split(":", 3)
    return parts[2] if len(parts) > 2 else ""


@dataclass(frozen=True)
class Edge:
    """``src --rel--> dst`` as stored in the graph index."""

    src: str
    rel: str
    dst: str
    lineage: bool  # an isLineage relationship (or a fine-grained schemaField edge)
    upstream: bool  # isUpstream: src is downstream of dst (only meaningful when lineage)
    created_on: int | None = None
    created_actor: str | None = None
    updated_on: int | None = None
    updated_actor: str | None = None
    via: str | None = None

    def lineage_parent_child(self) -> tuple[str, str]:
        """(upstream urn, downstream urn) of a lineage edge."""
        return (self.dst, self.src) if self.upstream else (self.src, self.dst)


@dataclass(frozen=True)
class _Spec:
    path: tuple[str, ...]  # field names and "*" (every array item / map value)
    rel: str
    lineage: bool
    upstream: bool
    entity_types: frozenset[str]
    created_on: str | None
    created_actor: str | None
    updated_on: str | None
    updated_actor: str | None
    via: str | None


def _split(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.strip("/").split("/") if p)


def _spec(path: tuple[str, ...], props: dict[str, Any]) -> _Spec:
    return _Spec(
        path=path,
        rel=str(props["name"]),
        lineage=bool(props.get("isLineage", False)),
        upstream=bool(props.get("isUpstream", True)),
        entity_types=frozenset(props.get("entityTypes") or ()),
        created_on=props.get("createdOn"),
        created_actor=props.get("createdActor"),
        updated_on=props.get("updatedOn"),
        updated_actor=props.get("updatedActor"),
        via=props.get("via"),
    )


def _walk(
    schema: avro.schema.Schema, prefix: tuple[str, ...], seen: frozenset[str]
) -> Iterator[_Spec]:
    if isinstance(schema, avro.schema.UnionSchema):
        for branch in schema.schemas:
            yield from _walk(branch, prefix, seen)
    elif isinstance(schema, avro.schema.ArraySchema):
        yield from _walk(schema.items, (*prefix, "*"), seen)
    elif isinstance(schema, avro.schema.MapSchema):
        yield from _walk(schema.values, (*prefix, "*"), seen)
    elif isinstance(schema, avro.schema.RecordSchema):
        if schema.fullname in seen:  # recursive records carry no new annotations
            return
        inner = seen | {schema.fullname}
        for field in schema.fields:
            here = (*prefix, field.name)
            rel = field.other_props.get("Relationship")
            if isinstance(rel, dict) and "name" in rel:
                yield _spec(here, rel)
            elif isinstance(rel, dict):  # {"/*": {...}} or {"/*/destinationUrn": {...}}
                for sub, props in rel.items():
                    yield _spec((*here, *_split(sub)), props)
            yield from _walk(field.type, here, inner)


@functools.cache
def specs_for(aspect_name: str) -> tuple[_Spec, ...]:
    """Every relationship annotation reachable in an aspect's schema."""
    cls = ASPECT_MAP.get(aspect_name)
    if cls is None:
        return ()
    return tuple(_walk(cls.RECORD_SCHEMA, (), frozenset()))


def _values(value: Any, path: tuple[str, ...]) -> list[Any]:
    """Every value at ``path`` (``*`` fans out over arrays and maps), in document order."""
    current = [value]
    for step in path:
        nxt: list[Any] = []
        for item in current:
            if step == "*":
                if isinstance(item, list):
                    nxt.extend(item)
                elif isinstance(item, dict):
                    nxt.extend(item.values())
            elif isinstance(item, dict) and step in item:
                nxt.append(item[step])
        current = nxt
    return [v for v in current if v is not None]


def _nth(value: Any, path: str | None, index: int, size: int) -> Any:
    # GraphIndexUtils.getValue: a parallel list of the same length is indexed, else ignored.
    if not path:
        return None
    found = _values(value, _split(path))
    return found[index] if len(found) == size else None


def _fine_grained(urn: str, value: Any, edges: list[Edge]) -> None:
    for fgl in value.get("fineGrainedLineages") or []:
        downstreams, upstreams = fgl.get("downstreams"), fgl.get("upstreams")
        if not downstreams or not upstreams:
            break  # GMS stops at the first entry missing either side (a `break`, not `continue`)
        via = urn if urn.startswith("urn:li:dataJob:") else fgl.get("query")
        for down in downstreams:
            for up in upstreams:
                edges.append(Edge(down, DOWNSTREAM_OF, up, lineage=True, upstream=True, via=via))


def _input_fields(urn: str, value: Any, edges: list[Edge]) -> None:
    for field in value.get("fields") or []:
        target = field.get("schemaFieldUrn")
        path = (field.get("schemaField") or {}).get("fieldPath")
        if target and path:
            edges.append(
                Edge(f"urn:li:schemaField:({urn},{path})", DOWNSTREAM_OF, target, True, True)
            )


def edges_from_aspect(
    urn: str, aspect_name: str, value: dict[str, Any], last_observed: int | None = None
) -> list[Edge]:
    """The graph edges one aspect value contributes."""
    edges: list[Edge] = []
    if aspect_name in ("upstreamLineage", "dataJobInputOutput"):
        _fine_grained(urn, value, edges)
    elif aspect_name == "inputFields":
        _input_fields(urn, value, edges)
    for spec in specs_for(aspect_name):
        targets = _values(value, spec.path)
        for i, target in enumerate(targets):
            if not isinstance(target, str) or not target.startswith("urn:li:"):
                continue
            created = _nth(value, spec.created_on, i, len(targets)) or last_observed
            updated = _nth(value, spec.updated_on, i, len(targets)) or last_observed
            edges.append(
                Edge(
                    src=urn,
                    rel=spec.rel,
                    dst=target,
                    # LineageRegistry pairs each relationship with its declared opposing entity
                    # types, so a lineage edge to an undeclared type is never traversed.
                    lineage=spec.lineage and entity_type(target) in spec.entity_types,
                    upstream=spec.upstream,
                    created_on=created,
                    created_actor=_nth(value, spec.created_actor, i, len(targets)),
                    updated_on=updated,
                    updated_actor=_nth(value, spec.updated_actor, i, len(targets)),
                    via=_nth(value, spec.via, i, len(targets)),
                )
            )
    return edges
