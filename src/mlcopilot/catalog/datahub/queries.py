"""Every GraphQL document the DataHub backend sends, with the variables each one takes.

They are plain strings so a test can validate each against DataHub's SDL (graphql-core) and
estimate its complexity against GMS's limit (``graphQL.query.complexityLimit``, 2000).
GMS's complexity is static: every selected field counts once, however many urns a list
variable carries, so batch size is bounded by response size and server time, not by the limit.

Nothing here uses a type or field newer than DataHub 1.0, so the same documents work on every
server the backend supports; the Document entity (1.4+) is read over OpenAPI instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlcopilot.model import UPDATE_HISTORY

GRAPHQL_TYPES: dict[str, str] = {
    "dataset": "Dataset",
    "mlModel": "MLModel",
    "mlModelGroup": "MLModelGroup",
    "mlFeature": "MLFeature",
    "mlPrimaryKey": "MLPrimaryKey",
    "mlFeatureTable": "MLFeatureTable",
    "dataJob": "DataJob",
    "tag": "Tag",
}
"""Entity types whose GraphQL type has ``aspects(input:)``: their raw aspects come from
``entities(urns:)``. Every other type's aspects come from OpenAPI ``batchGet``."""

RELATIONSHIP_TYPES: frozenset[str] = frozenset({*GRAPHQL_TYPES, "dataProcessInstance"})
"""Entity types queried through GraphQL (for aspects and/or incoming relationships)."""

PRODUCES = ("Produces", "DataProcessInstanceProduces")
"""Relationships from a job or training run to what it writes (the ``produced_by`` hop)."""
CONTAINS = ("Contains",)
"""Relationship from a feature table to its features (the ``feature_table`` hop)."""
READERS = (
    "Consumes",
    "TrainedBy",
    "DerivedFrom",
    "KeyedBy",
    "DownstreamOf",
    "DataProcessInstanceConsumes",
)
"""Relationships whose source names the destination upstream in its own aspects: a model's
features (``Consumes``) and training jobs or runs (``TrainedBy``), a feature's or key's sources
(``DerivedFrom``), a table's keys (``KeyedBy``), a dataset's or job's upstreams
(``DownstreamOf``), a job's or run's inputs (``Consumes``, ``DataProcessInstanceConsumes``).
The reverse walk asks each entity for these, incoming (the training-data hop has none)."""
READER_TYPES = (
    "Dataset",
    "MLModel",
    "MLModelGroup",
    "MLFeature",
    "MLPrimaryKey",
    "MLFeatureTable",
    "DataJob",
    "DataProcessInstance",
)
"""GraphQL types asked for their readers (every type with ``relationships`` the walk visits)."""
RELATIONSHIP_PAGE = 1000
ASSERTION_PAGE = 200
"""Assertions per ``Dataset.assertions`` page (GMS's own default count)."""
INCIDENT_PAGE = 100
"""Active incidents per ``incidents`` page (GMS's default is 20)."""
ASSERTION_ASPECTS = ("assertionInfo", "dataPlatformInstance", "status")
"""The raw aspects read of each assertion (what ``aspects.assertion_from_aspects`` reads)."""

_RELATED = """
fragment related on EntityRelationshipsResult {
  start
  count
  total
  relationships { type entity { urn type } }
}
"""
_RAW = "aspects(input: $aspects) { aspectName payload }"
_PRODUCERS = "producers: relationships(input: $producers) { ...related }"
_TABLES = "tables: relationships(input: $tables) { ...related }"
_OPERATIONS = (
    # The recent history, not only the latest: stale_source learns a dataset's cadence from it.
    f"operations(limit: {UPDATE_HISTORY}) {{ timestampMillis lastUpdatedTimestamp "
    "operationType customOperationType }"
)

_PROFILE = (
    # What profile drift compares: no samples, histograms or value frequencies (large, and
    # not used), the statistics as DataHub writes them.
    "timestampMillis rowCount columnCount sizeInBytes fieldProfiles { fieldPath uniqueCount "
    "uniqueProportion nullCount nullProportion min max mean median stdev "
    "quantiles { quantile value } }"
)
_PROFILES = f"datasetProfiles(limit: 1) {{ {_PROFILE} }}"
"""A dataset's newest profile (GMS sorts timeseries by ``timestampMillis``, newest first)."""

_ASSERTION = (
    # Raw assertionInfo, as for every other entity: one translation for all backends, and
    # every shape (dbt's CUSTOM assertions, field assertions) without a typed selection each.
    "urn aspects(input: { aspectNames: ["
    + ", ".join(f'"{name}"' for name in ASSERTION_ASPECTS)
    + "], autoRenderOnly: false }) { aspectName payload } "
    # The newest completed run by timestampMillis (GMS sorts timeseries by time).
    "runEvents(status: COMPLETE, limit: 1) { runEvents { timestampMillis runId asserteeUrn "
    "status result { type severity rowCount missingCount unexpectedCount actualAggValue "
    "externalUrl nativeResults { key value } error { type } } } }"
)
_INCIDENT = (
    "urn incidentType customType title description priority "
    "incidentStatus { state stage } source { type source { urn } } startedAt created { time }"
)
_ASSERTIONS = (
    f"assertions(start: $assertionStart, count: {ASSERTION_PAGE}) "
    f"{{ start count total assertions {{ {_ASSERTION} }} }}"
)
_INCIDENTS = (
    f"incidents(state: ACTIVE, start: $incidentStart, count: {INCIDENT_PAGE}) "
    f"{{ start count total incidents {{ {_INCIDENT} }} }}"
)

ENTITIES = f"""
query mlcopilotEntities(
  $urns: [String!]!
  $aspects: AspectParams
  $producers: RelationshipsInput!
  $tables: RelationshipsInput!
  $assertionStart: Int = 0
  $incidentStart: Int = 0
) {{
  entities(urns: $urns) {{
    urn
    type
    ... on Dataset {{
      {_RAW} {_OPERATIONS} {_PROFILES} {_PRODUCERS} {_ASSERTIONS} {_INCIDENTS}
    }}
    ... on MLModel {{ {_RAW} {_PRODUCERS} }}
    ... on MLFeature {{ {_RAW} {_TABLES} }}
    ... on MLModelGroup {{ {_RAW} }}
    ... on MLPrimaryKey {{ {_RAW} }}
    ... on MLFeatureTable {{ {_RAW} }}
    ... on DataJob {{ {_RAW} {_INCIDENTS} }}
    ... on Tag {{ {_RAW} }}
    ... on DataProcessInstance {{ {_PRODUCERS} }}
  }}
}}
{_RELATED}"""
"""One batch of entities: raw aspects, the recent operations, a dataset's newest profile, who
writes or contains them, and DataHub's quality signals: a dataset's assertions with their
latest runs, and the active incidents on a dataset or job (GraphQL has neither on the ML
types)."""

PROFILES_BEFORE = f"""
query mlcopilotProfilesBefore($urns: [String!]!, $end: Long!) {{
  entities(urns: $urns) {{
    urn
    ... on Dataset {{ datasetProfiles(endTimeMillis: $end, limit: 1) {{ {_PROFILE} }} }}
  }}
}}
"""
"""Of a batch of datasets: each one's newest profile taken at or before ``end`` (a model's
training time), one profile per dataset whatever its history holds."""

ASSERTIONS = f"""
query mlcopilotAssertions($urn: String!, $assertionStart: Int!) {{
  entity(urn: $urn) {{
    urn
    ... on Dataset {{ {_ASSERTIONS} }}
  }}
}}
"""
"""The next page of one dataset's assertions (rare: over 200)."""

INCIDENTS = f"""
query mlcopilotIncidents($urn: String!, $incidentStart: Int!) {{
  entity(urn: $urn) {{
    urn
    ... on Dataset {{ {_INCIDENTS} }}
    ... on DataJob {{ {_INCIDENTS} }}
  }}
}}
"""
"""The next page of one entity's active incidents (rare: over 100)."""

RELATIONSHIPS = f"""
query mlcopilotRelationships($urn: String!, $input: RelationshipsInput!) {{
  entity(urn: $urn) {{
    urn
    relationships(input: $input) {{ ...related }}
  }}
}}
{_RELATED}"""
"""The next page of one entity's incoming relationships (rare: over 1000 producers)."""

_READERS = "readers: relationships(input: $readers) { ...related }"

DOWNSTREAM = f"""
query mlcopilotDownstream($urns: [String!]!, $readers: RelationshipsInput!) {{
  entities(urns: $urns) {{
    urn
    type
{chr(10).join(f"    ... on {t} {{ {_READERS} }}" for t in READER_TYPES)}
  }}
}}
{_RELATED}"""
"""One batch of a reverse walk's level: who names each entity upstream (:data:`READERS`)."""

_SCROLL_PAGE = "nextScrollId count total"
"""What every page of a scroll says besides its results: where the next page starts."""

LINEAGE = f"""
query mlcopilotLineage($input: ScrollAcrossLineageInput!) {{
  scrollAcrossLineage(input: $input) {{
    {_SCROLL_PAGE} isPartial
    searchResults {{ degree entity {{ urn type }} }}
  }}
}}
"""
"""One page of everything upstream of one urn, over every hop DataHub's index knows."""

SEARCH = f"""
query mlcopilotSearch($input: ScrollAcrossEntitiesInput!) {{
  scrollAcrossEntities(input: $input) {{
    {_SCROLL_PAGE}
    searchResults {{ entity {{ urn type }} }}
  }}
}}
"""
"""One page of urns of some entity types from the search index."""

ME = """
query mlcopilotMe {
  me {
    corpUser { urn username }
    platformPrivileges { createTags manageTags manageStructuredProperties manageDocuments }
  }
}
"""
"""Who the token belongs to and the platform privileges the setup and write-back use."""

PRIVILEGES = """
query mlcopilotPrivileges($urns: [String!]!) {
  entities(urns: $urns) {
    urn
    type
    ... on Dataset { privileges { canEditTags canEditIncidents canEditProperties } }
    ... on MLModel { privileges { canEditTags canEditIncidents canEditProperties } }
  }
}
"""
"""What the token may edit on sample entities (a dry probe: nothing is written)."""

DOCUMENTS: dict[str, str] = {
    "mlcopilotEntities": ENTITIES,
    "mlcopilotRelationships": RELATIONSHIPS,
    "mlcopilotDownstream": DOWNSTREAM,
    "mlcopilotAssertions": ASSERTIONS,
    "mlcopilotIncidents": INCIDENTS,
    "mlcopilotProfilesBefore": PROFILES_BEFORE,
    "mlcopilotLineage": LINEAGE,
    "mlcopilotSearch": SEARCH,
    "mlcopilotMe": ME,
    "mlcopilotPrivileges": PRIVILEGES,
}
"""Every document by operation name (what the tests validate against the SDL)."""


def entities_variables(urns: Sequence[str], aspect_names: Sequence[str]) -> dict[str, Any]:
    """Variables of :data:`ENTITIES`."""
    return {
        "urns": list(urns),
        # autoRenderOnly is sent explicitly: older GMS unboxes it without a null check.
        "aspects": {"aspectNames": list(aspect_names), "autoRenderOnly": False},
        "producers": incoming(PRODUCES),
        "tables": incoming(CONTAINS),
    }


def downstream_variables(urns: Sequence[str]) -> dict[str, Any]:
    """Variables of :data:`DOWNSTREAM`."""
    return {"urns": list(urns), "readers": incoming(READERS)}


def incoming(types: Sequence[str], start: int = 0) -> dict[str, Any]:
    """A ``RelationshipsInput`` for incoming relationships of ``types``, soft-deleted included."""
    return {
        "types": list(types),
        "direction": "INCOMING",
        "start": start,
        "count": RELATIONSHIP_PAGE,
        "includeSoftDelete": True,
    }


def lineage_variables(
    urn: str, degrees: Sequence[str], count: int, scroll_id: str | None
) -> dict[str, Any]:
    """Variables of :data:`LINEAGE`.

    The ``degree`` facet is the only hop control DataHub has (``"3+"`` means unbounded).
    The walk reports soft-deleted entities as removed, and GMS's lineage cache is skipped
    (``skipCache``): without it GMS answers from the walk it cached for the same urn and flags
    (for ``CACHE_TTL_SECONDS``, 600 s by default; stale past a day if that is raised), and
    says nothing of it (``freshness`` stays null), so a scan would miss edges written since.
    """
    return {
        "input": {
            "urn": urn,
            "direction": "UPSTREAM",
            "orFilters": [
                {"and": [{"field": "degree", "condition": "EQUAL", "values": list(degrees)}]}
            ],
            **_scroll(count, scroll_id, skipCache=True),
        }
    }


def search_variables(types: Sequence[str], count: int, scroll_id: str | None) -> dict[str, Any]:
    """Variables of :data:`SEARCH` for any GraphQL ``EntityType`` names (e.g. ``MLMODEL``).

    The catalog decides about soft-deleted entities from their aspects, as Lite does.
    """
    return {"input": {"types": list(types), "query": "*", **_scroll(count, scroll_id)}}


def _scroll(count: int, scroll_id: str | None, **flags: bool) -> dict[str, Any]:
    """The paging part of a scroll's input, the same for lineage and search.

    Soft-deleted entities are included (the callers decide about them), and nothing is
    highlighted or aggregated: only urns are read.
    """
    return {
        "count": count,
        "scrollId": scroll_id,
        "keepAlive": "5m",
        "searchFlags": {
            **flags,
            "skipHighlighting": True,
            "skipAggregates": True,
            "includeSoftDeleted": True,
        },
    }


def degrees_for(max_hops: int) -> list[str]:
    """The ``degree`` facet values that cover ``max_hops`` hops."""
    if max_hops <= 1:
        return ["1"]
    if max_hops == 2:
        return ["1", "2"]
    return ["1", "2", "3+"]
