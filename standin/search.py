"""A small stand-in for GMS's entity search index: filters, free text, facets and paging.

Each entity gets a search document (field → values) computed from its aspects, and filters
are evaluated the way Elasticsearch would on keyword fields. Ranking is not modelled: every
match scores the same, so results come in urn order (GMS's tie-breaker). Results name
entities by urn; :mod:`standin.gql` makes the GraphQL objects.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from standin.catalog import SEARCHABLE, Catalog, key_of, to_entity_type, type_enum
from standin.edges import entity_type

Json = dict[str, Any]
Criterion = Json

DEFAULT_COUNT = 10
MAX_AGG_VALUES = 20


# --- filters ---------------------------------------------------------------------------------


def or_filters(input: Json) -> list[list[Criterion]]:
    """``orFilters`` (OR of ANDs), or the deprecated flat ``filters`` as one AND clause."""
    clauses = [list(c.get("and") or []) for c in input.get("orFilters") or []]
    if not clauses and input.get("filters"):
        clauses = [list(input["filters"])]
    return clauses


def criterion_values(c: Criterion) -> list[str]:
    values = c.get("values")
    if values is None and c.get("value") is not None:
        values = [c["value"]]
    return [str(v) for v in values or []]


def _platform_urn(value: str) -> str:
    return value if value.startswith("urn:li:") else f"urn:li:dataPlatform:{value}"


def _name(ctx: Catalog, urn: str) -> str:
    for aspect in ("datasetProperties", "mlModelProperties", "tagProperties", "documentInfo"):
        value = ctx.aspect(urn, aspect) or {}
        if value.get("name") or value.get("title"):
            return str(value.get("name") or value.get("title"))
    key = key_of(urn)
    return str(key.get("name") or key.get("id") or key.get("username") or urn)


def _description(ctx: Catalog, urn: str) -> str:
    for aspect in (
        "editableDatasetProperties",
        "datasetProperties",
        "mlModelProperties",
        "mlFeatureProperties",
        "mlFeatureTableProperties",
        "tagProperties",
    ):
        text = (ctx.aspect(urn, aspect) or {}).get("description")
        if text:
            return str(text)
    return str(((ctx.aspect(urn, "documentInfo") or {}).get("contents") or {}).get("text") or "")


def _platform(ctx: Catalog, urn: str) -> list[str]:
    key = key_of(urn)
    platform = key.get("platform") or key.get("orchestrator")
    if not platform and entity_type(urn) == "dataJob":
        platform = key_of(key.get("flow") or "").get("orchestrator")
    if not platform:
        platform = (ctx.aspect(urn, "dataPlatformInstance") or {}).get("platform")
    return [_platform_urn(platform)] if platform else []


def _field_values(ctx: Catalog, urn: str, field: str) -> list[str]:
    """The values an entity's search document holds for ``field``."""
    base = field.removesuffix(".keyword")
    if base == "urn":
        return [urn]
    if base in ("_entityType", "entity", "_index"):
        return [type_enum(urn), entity_type(urn)]
    if base == "platform":
        return _platform(ctx, urn)
    if base in ("origin", "env"):
        origin = key_of(urn).get("origin")
        return [str(origin)] if origin else []
    if base == "removed":
        return ["true" if ctx.index.is_removed(urn) else "false"]
    if base == "name":
        return [_name(ctx, urn)]
    if base == "description":
        return [_description(ctx, urn)]
    if base == "tags":
        return [t["tag"] for t in (ctx.aspect(urn, "globalTags") or {}).get("tags") or []]
    if base == "glossaryTerms":
        return [t["urn"] for t in (ctx.aspect(urn, "glossaryTerms") or {}).get("terms") or []]
    if base in ("fieldTags", "fieldGlossaryTerms"):
        return _field_labels(ctx, urn, tags=base == "fieldTags")
    if base == "owners":
        return [o["owner"] for o in (ctx.aspect(urn, "ownership") or {}).get("owners") or []]
    if base == "domains":
        return list((ctx.aspect(urn, "domains") or {}).get("domains") or [])
    if base == "container":
        container = (ctx.aspect(urn, "container") or {}).get("container")
        return [container] if container else []
    if base == "typeNames":
        return list((ctx.aspect(urn, "subTypes") or {}).get("typeNames") or [])
    if base == "customProperties":
        props: dict[str, Any] = {}
        for row in ctx.rows(urn).values():
            if isinstance(row.value.get("customProperties"), dict):
                props.update(row.value["customProperties"])
        return [f"{k}={v}" for k, v in props.items()]
    if base == "state" and entity_type(urn) == "incident":
        status = ((ctx.aspect(urn, "incidentInfo") or {}).get("status") or {}).get("state")
        return [status] if status else []
    if base == "entities" and entity_type(urn) == "incident":
        return list((ctx.aspect(urn, "incidentInfo") or {}).get("entities") or [])
    return []


def _field_labels(ctx: Catalog, urn: str, *, tags: bool) -> list[str]:
    found: list[str] = []
    schema = ctx.aspect(urn, "schemaMetadata") or {}
    editable = ctx.aspect(urn, "editableSchemaMetadata") or {}
    infos = (schema.get("fields") or []) + (editable.get("editableSchemaFieldInfo") or [])
    for info in infos:
        if tags:
            found += [t["tag"] for t in (info.get("globalTags") or {}).get("tags") or []]
        else:
            found += [t["urn"] for t in (info.get("glossaryTerms") or {}).get("terms") or []]
    return found


def _criterion_matches(ctx: Catalog, urn: str, c: Criterion) -> bool:
    field = str(c.get("field", ""))
    wanted = criterion_values(c)
    condition = (c.get("condition") or "EQUAL").upper()
    have = _field_values(ctx, urn, field)
    if field.removesuffix(".keyword") in ("_entityType", "entity", "_index"):
        wanted = [to_entity_type(w) for w in wanted]
        have = [entity_type(urn)]
    elif field.removesuffix(".keyword") == "platform":
        wanted = [_platform_urn(w) for w in wanted]
    if condition == "EXISTS":
        result = bool(have)
    elif condition == "IS_NULL":
        result = not have
    elif condition == "CONTAIN":
        result = any(w.lower() in h.lower() for w in wanted for h in have)
    elif condition == "START_WITH":
        result = any(h.startswith(w) for w in wanted for h in have)
    elif condition == "END_WITH":
        result = any(h.endswith(w) for w in wanted for h in have)
    elif condition in (
        "GREATER_THAN",
        "GREATER_THAN_OR_EQUAL_TO",
        "LESS_THAN",
        "LESS_THAN_OR_EQUAL_TO",
    ):
        result = any(_compare(h, w, condition) for w in wanted for h in have)
    else:  # EQUAL, IN, DESCENDANTS_INCL, ...: exact keyword match
        result = any(h == w for w in wanted for h in have)
    return result != bool(c.get("negated", False))


def _compare(have: str, want: str, condition: str) -> bool:
    try:
        a, b = float(have), float(want)
    except ValueError:
        return False
    return {
        "GREATER_THAN": a > b,
        "GREATER_THAN_OR_EQUAL_TO": a >= b,
        "LESS_THAN": a < b,
        "LESS_THAN_OR_EQUAL_TO": a <= b,
    }[condition]


def matches_filters(
    ctx: Catalog, urn: str, clauses: list[list[Criterion]], skip: Iterable[str] = ()
) -> bool:
    skipped = set(skip)
    kept = [[c for c in clause if c.get("field") not in skipped] for clause in clauses]
    kept = [clause for clause in kept if clause]
    if not kept:
        return True
    return any(all(_criterion_matches(ctx, urn, c) for c in clause) for clause in kept)


def matches_query(ctx: Catalog, urn: str, query: str | None) -> bool:
    """Free text: every word must occur in the urn, name, description or a field path."""
    text = (query or "").strip()
    if text in ("", "*"):
        return True
    haystack = " ".join([urn, _name(ctx, urn), _description(ctx, urn)])
    schema = ctx.aspect(urn, "schemaMetadata") or {}
    haystack += " " + " ".join(f.get("fieldPath", "") for f in schema.get("fields") or [])
    haystack = haystack.lower()
    return all(word in haystack for word in text.lower().replace('"', " ").split() if word != "*")


# --- facets and paging -----------------------------------------------------------------------

_FACETS = (
    ("_entityType", "Type"),
    ("platform", "Platform"),
    ("origin", "Environment"),
    ("tags", "Tag"),
    ("glossaryTerms", "Glossary Term"),
    ("domains", "Domain"),
    ("owners", "Owned By"),
)


def facets(ctx: Catalog, urns: list[str], search_flags: Json | None) -> list[Json]:
    flags = search_flags or {}
    if flags.get("skipAggregates"):
        return []
    limit = flags.get("maxAggValues") or MAX_AGG_VALUES
    result = []
    for field, display in _FACETS:
        counts: Counter[str] = Counter()
        for urn in urns:
            values = [type_enum(urn)] if field == "_entityType" else _field_values(ctx, urn, field)
            counts.update(set(values))
        if not counts:
            continue
        aggregations = [
            {
                "value": value,
                "count": count,
                "entity": value if value.startswith("urn:li:") else None,
                "displayName": None,
            }
            for value, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        ]
        result.append({"field": field, "displayName": display, "aggregations": aggregations})
    return result


def encode_scroll(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"standin": offset}).encode()).decode()


def decode_scroll(scroll_id: str | None) -> int:
    if not scroll_id:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(scroll_id.encode()))["standin"])
    except Exception as exc:
        raise ValueError(f"Invalid scrollId {scroll_id!r}") from exc


def page_bounds(input: Json, total: int, *, scroll: bool) -> tuple[int, int, str | None]:
    """(start, end, nextScrollId) for offset paging (``start``) or cursor paging."""
    count = input.get("count")
    count = DEFAULT_COUNT if count is None else max(0, int(count))
    start = decode_scroll(input.get("scrollId")) if scroll else int(input.get("start") or 0)
    end = min(total, start + count)
    next_id = encode_scroll(end) if scroll and end < total and count > 0 else None
    return start, end, next_id


# --- searchAcrossEntities / scrollAcrossEntities ---------------------------------------------


def search_entities(ctx: Catalog, input: Json, *, scroll: bool) -> Json:
    types = [to_entity_type(t) for t in input.get("types") or []] or list(SEARCHABLE)
    flags = input.get("searchFlags") or {}
    clauses = or_filters(input)
    hits = [
        urn
        for urn in ctx.index.urns(types)
        if ctx.searchable(urn)  # the index has not caught up with an entity written just now
        and (flags.get("includeSoftDeleted") or not ctx.index.is_removed(urn))
        and matches_filters(ctx, urn, clauses)
        and matches_query(ctx, urn, input.get("query"))
    ]
    hits = _sorted(ctx, hits, input.get("sortInput"))
    start, end, next_id = page_bounds(input, len(hits), scroll=scroll)
    page = hits[start:end]
    results: list[Json] = [
        {"entity": urn, "matchedFields": [], "insights": [], "extraProperties": []} for urn in page
    ]
    body: Json = {
        "count": len(page),
        "total": len(hits),
        "searchResults": results,
        "facets": facets(ctx, hits, flags),
    }
    if scroll:
        body["nextScrollId"] = next_id
    else:
        body["start"] = start
        body["suggestions"] = []
    return body


def _sorted(ctx: Catalog, urns: list[str], sort_input: Json | None) -> list[str]:
    spec = sort_input or {}
    criteria = spec.get("sortCriteria") or (
        [spec["sortCriterion"]] if spec.get("sortCriterion") else []
    )
    ordered = sorted(urns)
    for c in reversed(criteria):
        field = str(c.get("field", "urn"))

        def sort_key(urn: str, field: str = field) -> str:
            return (_field_values(ctx, urn, field) or [""])[0].lower()

        ordered.sort(key=sort_key, reverse=(c.get("sortOrder") == "DESCENDING"))
    return ordered


# --- entity sub-queries that are searches in GMS ---------------------------------------------


def related_documents(ctx: Catalog, urn: str, input: Json) -> Json:
    """Documents whose ``documentInfo.relatedAssets`` name ``urn`` (``relatedDocuments``)."""
    edges = ctx.index.relationships(urn, ["RelatedAsset"], outgoing=False)
    docs = [e.src for e in edges if ctx.exists(e.src) and not ctx.index.is_removed(e.src)]
    wanted_types = set(input.get("types") or [])
    parents = set(input.get("parentDocuments") or [])
    kept = []
    for doc in sorted(set(docs)):
        info = ctx.aspect(doc, "documentInfo") or {}
        parent = (info.get("parentDocument") or {}).get("document")
        sub_types = set((ctx.aspect(doc, "subTypes") or {}).get("typeNames") or [])
        if wanted_types and not wanted_types & sub_types:
            continue
        if parents and parent not in parents:
            continue
        if input.get("rootOnly") and parent:
            continue
        source = (info.get("source") or {}).get("sourceType")
        if input.get("sourceType") and source != input["sourceType"]:
            continue
        kept.append(doc)
    start = int(input.get("start") or 0)
    count = input.get("count")
    page = kept[start : start + (100 if count is None else int(count))]
    return {
        "start": start,
        "count": len(page),
        "total": len(kept),
        "documents": page,
        "facets": [],
    }


_PRIORITY_NUMBER = {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3}


def incidents_on(ctx: Catalog, urn: str, args: Json) -> Json:
    """``incidents(state, stage, priority, assigneeUrns, start, count)`` on an entity."""
    edges = ctx.index.relationships(urn, ["IncidentOn"], outgoing=False)
    found = []
    for incident in sorted({e.src for e in edges}):
        info = ctx.aspect(incident, "incidentInfo")
        if info is None or (ctx.aspect(incident, "status") or {}).get("removed"):
            continue  # the search index GMS filters by leaves soft-deleted incidents out
        status = info.get("status") or {}
        if args.get("state") and status.get("state") != args["state"]:
            continue
        if args.get("stage") and status.get("stage") != args["stage"]:
            continue
        if args.get("priority") and info.get("priority") != _PRIORITY_NUMBER.get(args["priority"]):
            continue
        assignees = {a.get("actor") for a in info.get("assignees") or []}
        if args.get("assigneeUrns") and not assignees & set(args["assigneeUrns"]):
            continue
        found.append((-(info.get("created") or {}).get("time", 0), incident))
    ordered = [u for _, u in sorted(found)]
    start = int(args.get("start") or 0)
    count = args.get("count")
    page = ordered[start : start + (20 if count is None else int(count))]
    return {
        "start": start,
        "count": len(page),
        "total": len(ordered),
        "incidents": page,
    }
