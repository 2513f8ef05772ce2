"""A live DataHub (GMS) as the catalog: batched reads, multi-hop lineage, idempotent writes.

Entities are read as raw aspects — GraphQL ``entities(urns:) { aspects(...) }`` in batches,
OpenAPI ``batchGet`` for the types GraphQL has no ``aspects`` on — so
:mod:`mlcopilot.catalog.aspects` translates them exactly as it translates DataHub Lite's, and
both backends give the same nodes, edges and lineage for the same metadata.

Lineage is the same breadth-first walk as Lite's, over edges read from aspects, so it has the
same hops (training data, feature tables and training-run inputs included, which DataHub's
lineage index misses) and the same paths. What makes it fast is a prefetch that reads the
graph a whole level at a time — every entity of the level, of every model being scanned, in
concurrent batches — so a scan costs about one batch per level and per ``batch_size``
unique entities, however many models share them. A graph that keeps going after
:data:`DEEP_LEVELS` levels with a narrow frontier (a long chain) is finished with DataHub's
lineage index instead: one ``scrollAcrossLineage`` from each frontier urn finds everything
upstream of it in ``ceil(N / page)`` requests, fetched in batches. The walk then runs on the
cache; anything the prefetch missed (a scroll GMS refused or cut short: its relation cap, its
graph timeout, its rate limit; an index lagging behind writes) is fetched by the walk itself,
so the result never depends on DataHub's lineage index being complete or current.

The reverse walk (which models read an entity, :mod:`mlcopilot.lineage.downstream`) asks DataHub's
relationship index who names a whole level upstream, in batched ``relationships(INCOMING)``
queries, and reads those readers' edges from their aspects like the upstream walk's; the
training-data hop, which DataHub indexes nowhere, is every model's ``mlModelTrainingData``
read once per walk and reversed.

Every urn is fetched and translated once per catalog instance (one scan); the versions read
for training-time schemas are kept too, so models sharing a dataset read its history once.
Writes re-read what they change.
"""

from __future__ import annotations

import heapq
import logging
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import repeat
from typing import Any, Literal, TypeVar

from datahub.metadata.schema_classes import StructuredPropertyDefinitionClass, TagPropertiesClass

from mlcopilot.catalog import aspect_writes
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.datahub import queries as q
from mlcopilot.catalog.datahub.client import GmsClient, gave_way, loads
from mlcopilot.catalog.datahub.connection import DataHubSettings, normalize_url
from mlcopilot.catalog.datahub.deadline import within
from mlcopilot.catalog.datahub.owners import read_contacts
from mlcopilot.catalog.payloads import as_int, envelope_values, mapping, result_urns, written_at
from mlcopilot.catalog.urns import NO_LINEAGE, aspects_among, urn_type
from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.incidents.writeback import INCIDENTS_ON_EVERY_DATAHUB, ML_INCIDENT_TYPES
from mlcopilot.lineage.downstream import downstream_models_of
from mlcopilot.lineage.upstream import walk_upstream
from mlcopilot.model import (
    AssertionState,
    Contact,
    DatasetProfile,
    Edge,
    IncidentSignal,
    IncidentWrite,
    Lineage,
    Node,
    Schema,
    Urn,
    Write,
)
from mlcopilot.protocols import ClosedOnExit, WalkLimits
from mlcopilot.redact import register_secret

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds to connect and to wait for each response (DataHub's own client default)."""
DEFAULT_RETRIES = 2
"""Retries of a 429/5xx/dropped connection, with the SDK's backoff (0 s, then 4 s)."""
LINEAGE_PAGE = 1000
"""Results per ``scrollAcrossLineage`` page: well inside GMS's search limit (5000 default)."""
SEARCH_PAGE = 1000
MAX_HISTORY_PROBES = 21
"""Aspect versions read at most per ``schema_as_of`` (GMS keeps about 20 by default)."""
BATCH_SIZE = 500
"""Urns per ``entities`` query / ``batchGet`` by default. Requests, not bytes, dominate a
remote scan (each costs a round trip): 500 keeps a 10,000-entity model within a few dozen
requests while each response stays a few megabytes (see ``benchmarks/RESULTS.md``)."""
WRITE_SLICE = 5_000
"""Writes a dry run's write-back compares at once (:meth:`DataHubCatalog._changed`)."""
SMALL_BATCH = 1000
"""Urns per ``batchGet`` of a few small aspects (schema versions, the write-back's state):
smaller items than a whole entity's, so larger batches."""
DEEP_LEVELS = 4
"""Narrow levels in a row the prefetch reads one by one before it asks DataHub's lineage index
for everything further up (a long chain would otherwise cost a round trip per hop)."""
SCROLL_ROOTS = 4
"""At most this many urns to fetch make a level narrow: scrolling from each costs a request,
so a wider frontier is cheaper read level by level."""

READ_ASPECTS: tuple[str, ...] = tuple(
    sorted(
        {
            *ax.EDGE_ASPECTS,
            *ax.REVERSE_EDGE_ASPECTS,
            *ax.SCHEMA_ASPECTS,
            *ax.TRAINING_RUN_ASPECTS,
            # what node_from_aspects reads
            "datasetProperties",
            "mlModelProperties",
            "mlModelGroupProperties",
            "dataJobInfo",
            "mlFeatureProperties",
            "mlPrimaryKeyProperties",
            "mlFeatureTableProperties",
            "globalTags",
            "glossaryTerms",
            "structuredProperties",
            "deprecation",
            "status",
            # what the write-back compares before writing
            "tagProperties",
            "propertyDefinition",
            "incidentInfo",
            "documentInfo",
            # descriptive aspects: an entity holding only these still exists
            "ownership",
            "subTypes",
            "domains",
            "institutionalMemory",
            "editableDatasetProperties",
            "editableMlModelProperties",
            "editableMlFeatureProperties",
            "editableMlFeatureTableProperties",
            "editableMlPrimaryKeyProperties",
            "editableDataJobProperties",
        }
    )
)
"""The aspects read for every entity: everything mlcopilot interprets, nothing more."""

_T = TypeVar("_T")
_R = TypeVar("_R")


# --- definitions the product writes (tags, structured properties) ---------------------------


@dataclass(frozen=True, slots=True)
class TagDefinition:
    """A tag entity mlcopilot writes onto assets."""

    urn: Urn
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class PropertyDefinition:
    """A structured property definition mlcopilot writes or reads."""

    urn: Urn
    display_name: str
    value_type: Literal["string", "number", "date"]
    cardinality: Literal["SINGLE", "MULTIPLE"]
    entity_types: tuple[str, ...]
    """DataHub entity type names, e.g. ``("mlModel",)``."""
    description: str


Definition = TagDefinition | PropertyDefinition


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``/config`` says about the server."""

    version: str | None
    cloud: bool
    documents: bool
    """True when the server has the Document entity (Core ≥ 1.4)."""


@dataclass(frozen=True, slots=True)
class IncidentSupport:
    """Which ML entity types this DataHub takes incidents on (DataHub PRs #19112, #19367)."""

    ml_types: tuple[str, ...]
    """Of ``mlModel``, ``mlFeature``, ``mlFeatureTable``: those whose GraphQL type has
    ``incidents`` (the same PRs put them on ``IncidentOn``, the write allowlist)."""
    unknown: str | None = None
    """Why the server could not be asked (then ``ml_types`` is empty); None: it answered."""

    @property
    def entity_types(self) -> frozenset[str]:
        """Every entity type an incident may name here."""
        return INCIDENTS_ON_EVERY_DATAHUB | set(self.ml_types)


@dataclass(frozen=True, slots=True)
class FittedIncidents:
    """Writes with each incident naming only what the server accepts (``fit_incidents``)."""

    sent: list[Write]
    """The writes to make: an incident narrowed to the entities the server accepts."""
    skipped: tuple[IncidentWrite, ...]
    """Incidents naming nothing the server accepts: not written."""
    narrowed: dict[int, Write] = field(default_factory=dict)
    """By the id of each narrowed write in :attr:`sent`, the write it stands for."""

    def reported(self, changed: Sequence[Write]) -> list[Write]:
        """``changed`` (of :attr:`sent`) as the writes given: what ``apply`` reports."""
        return [self.narrowed.get(id(w), w) for w in changed]


_INCIDENT_FIELDS = """query mlcopilotIncidentTypes {
  mlModel: __type(name: "MLModel") { fields { name } }
  mlFeature: __type(name: "MLFeature") { fields { name } }
  mlFeatureTable: __type(name: "MLFeatureTable") { fields { name } }
}"""
"""Introspection of the fields of the GraphQL type of each of
:data:`~mlcopilot.incidents.writeback.ML_INCIDENT_TYPES` (aliased by its entity type)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the token belongs to and the platform privileges GMS reports for them."""

    user: str | None
    privileges: Mapping[str, bool | None]


# --- the catalog ----------------------------------------------------------------------------


_RawAssertion = tuple[Urn, dict[str, ax.JsonObject], ax.JsonObject | None]
"""One assertion as read: its urn, raw aspects and latest completed run (aspect JSON)."""


@dataclass(slots=True)
class _Bundle:
    """One entity as read: its aspects and who points at it (for the reverse hops)."""

    aspects: dict[str, ax.JsonObject] = field(default_factory=dict)
    producers: list[Urn] = field(default_factory=list)
    """Jobs and training runs that write it (incoming ``Produces``)."""
    tables: list[Urn] = field(default_factory=list)
    """Feature tables that contain it (incoming ``Contains``)."""

    assertions: list[_RawAssertion] | None = None
    """A dataset's assertions as read (GraphQL has them on datasets only); None: not read."""
    incidents: list[tuple[Urn, ax.JsonObject]] | None = None
    """Its active incidents as ``incidentInfo`` JSON (datasets and jobs); None: not read."""
    updates: list[int] | None = None
    """A dataset's recent updates (epoch ms) from its ``operations``; None: not read."""
    profile: ax.JsonObject | None = None
    """A dataset's newest ``datasetProfile`` (GraphQL's shape, the aspect's names)."""

    upstream: list[Edge] | None = None
    """Its edges once worked out (the walk asks for them more than once)."""
    whole: bool = True
    """False once :meth:`slim` has dropped what only its translation reads."""

    def slim(self, urn: Urn) -> None:
        """Keep, of an entity translated, only what is read of it afterwards.

        That is its edges (worked out now) and :data:`_KEPT_ASPECTS`; its other aspects,
        assertions, incidents, updates and profile are in its node. Translating it again (a
        write clears the nodes) reads it again. The raw aspects of a scan's every entity were
        most of a large estate's memory: 15 KB an entity, 1.5 GB for 100,000.
        """
        self.edges(urn)
        self.aspects = {n: v for n, v in self.aspects.items() if n in _KEPT_ASPECTS}
        self.assertions = self.incidents = self.updates = self.profile = None
        self.whole = False

    def edges(self, urn: Urn) -> list[Edge]:
        """Its upstream edges, in Lite's order: its own aspects', then reverse hops by urn."""
        if self.upstream is None:
            own = ax.edges_from_aspects(urn, self.aspects)
            reverse = [Edge(urn, t, "feature_table") for t in sorted(set(self.tables))]
            reverse += [Edge(urn, p, "produced_by") for p in sorted(set(self.producers))]
            self.upstream = list(dict.fromkeys([*own, *sorted(reverse, key=lambda e: e.upstream)]))
        return self.upstream


_KEPT_ASPECTS = frozenset(
    {"status", *ax.REVERSE_EDGE_ASPECTS, "mlModelProperties", *ax.TRAINING_RUN_ASPECTS}
)
"""What is read of an entity once it is translated: its reverse edges (the downstream walk),
and of a training run what its model's translation reads (``related``)."""
_WHOLE_TYPES = frozenset({"mlModel"})
"""Entity types never slimmed: a model's aspects say whether it exists (:meth:`models`) and
what it trained on (the downstream walk's training index)."""


def _needed_again(needs: Iterable[Iterable[Urn]]) -> dict[int, int]:
    """``hash(urn) -> the last part needing it``, for the urns more than one part needs.

    By hash, not urn: a planned write's urn is made on each read (282,022 incidents' and
    as many documents' at 10,000 models); keyed by urn, this map held them all at once and
    made the compare the second scan's peak again (1,051 MB; 995 by hash, stage probe). A hash
    two urns share only carries what one part changed on to a part that does not need it,
    which changes nothing that part folds.

    Each part's hashes are kept sorted in an array (8 bytes each) and merged, rather than
    every hash in a dict to find the repeats: at 10,000 models the dict (564,044 incident and
    document urns, each needed once) was the dry run's peak, 934 MB; 912 MB now, planning the
    notifications. Modelled alone: 42.8 MB at its peak, 5.8 MB now, for 0.4 s more CPU.
    """
    parts = [array("q", sorted({hash(urn) for urn in urns})) for urns in needs]
    again: dict[int, int] = {}
    last: int | None = None
    # In hash order, and a hash's parts in ascending order: the last one seen is the last.
    for key, index in heapq.merge(*(zip(part, repeat(i)) for i, part in enumerate(parts))):
        if key == last:
            again[key] = index
        last = key
    return again


def _holds(urn: Urn, types: set[str]) -> bool:
    """True when ``urn`` is of a type Lite's reverse hops count for these relationships."""
    entity_type = urn_type(urn)
    if "Contains" in types:
        return entity_type == "mlFeatureTable"
    return entity_type in ("dataJob", "dataProcessInstance")


LineageFinder = Callable[[Sequence[Urn], int, int], list[list[Urn]]]
"""``(roots, hops, cap)`` → the urns DataHub's lineage index has upstream of each root.

``hops`` is 1, 2 or 3 (3 = every hop); at most ``cap`` urns per root."""


_Version = tuple[int | None, ax.JsonObject | None, int | None]
"""One aspect version as the history walk needs it: (written at, value, newest version).

``newest`` is only known for version 0, and its value is kept only when there is no newer
numbered version to walk from (it is not dated by its own write)."""


class DataHubCatalog(ClosedOnExit):
    """A :class:`~mlcopilot.protocols.Catalog` over a DataHub GMS, through acryl-datahub.

    Construction does no I/O; the first call connects. One instance is one scan's view: each
    urn is fetched once and kept, and :meth:`apply` re-reads what it writes.

    Args:
        server_url: The GMS URL, e.g. ``http://localhost:8080``, or resolved settings.
        token: A personal access token; None for a server without authentication.
        batch_size: Urns per ``entities`` query (GMS's complexity limit does not depend on it).
        max_workers: Requests in flight at once.
        timeout: Seconds to connect and to wait for each response.
        retries: Retries of 429/5xx and dropped connections, with backoff.
        lineage_page: Results per ``scrollAcrossLineage`` page.
        find_lineage: What to ask instead of ``scrollAcrossLineage`` for everything DataHub's
            lineage index has upstream of some roots (the MCP backend asks ``get_lineage``).
    """

    def __init__(
        self,
        server_url: str | DataHubSettings,
        *,
        token: str | None = None,
        batch_size: int = BATCH_SIZE,
        max_workers: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        lineage_page: int = LINEAGE_PAGE,
        find_lineage: LineageFinder | None = None,
    ) -> None:
        if batch_size < 1 or max_workers < 1 or lineage_page < 1:
            raise ValueError("batch_size, max_workers and lineage_page must be positive")
        if isinstance(server_url, DataHubSettings):
            settings = server_url if token is None else replace(server_url, token=token)
        else:
            settings = DataHubSettings(server=normalize_url(server_url), token=token or None)
        # Logs, errors and reports are scrubbed of the token process-wide from here on.
        register_secret(settings.token)
        self._settings = settings
        self._client = GmsClient(settings, timeout=timeout, retries=retries)
        self._batch_size = batch_size
        self._max_workers = max_workers
        self._lineage_page = lineage_page
        self._find_lineage = find_lineage
        self._executor: ThreadPoolExecutor | None = None
        self._cache: dict[Urn, _Bundle] = {}
        self._nodes: dict[Urn, Node] = {}
        self._put_off: list[tuple[Urn, _Bundle, bool]] = []
        """Entities read but not yet translated: those of a fetch's last batch, translated
        while the next fetch's requests are on the wire (or by :meth:`nodes`); and whether
        to slim each then (:meth:`_translate`)."""
        self._versions: dict[tuple[Urn, str, int], _Version | None] = {}
        self._profiles: dict[tuple[Urn, int], DatasetProfile | None] = {}
        """Profiles read as of a time (epoch ms), for the rest of this scan."""
        self._scrolled: dict[tuple[Urn, tuple[str, ...]], list[Urn]] = {}
        self._scroll_given_up: str | None = None
        """Why GMS's lineage search was given up for this scan (its rate limit, its time
        limit): it is not asked again; the walk reads aspects, as it would anyway."""
        self._readers: dict[Urn, list[Urn]] = {}
        """Who names each urn upstream (incoming :data:`~queries.READERS`); once per walk."""
        self._trained_on: dict[Urn, list[Edge]] | None = None
        """Every model's ``training_data`` edges by dataset; read once per reverse walk."""
        self.skipped_writes: tuple[Write, ...] = ()
        """Writes the last :meth:`apply` could not make (documents on a server < 1.4)."""
        self._incident_support: IncidentSupport | None = None
        """Which ML entity types take incidents here; asked once per instance."""

    @classmethod
    def from_settings(cls, settings: DataHubSettings, **options: Any) -> DataHubCatalog:
        """A catalog for resolved settings (see :mod:`mlcopilot.catalog.datahub.connection`)."""
        return cls(settings, **options)

    @property
    def label(self) -> str:
        """``datahub:<url>`` (never the token)."""
        return f"datahub:{self._settings.display_url}"

    # --- Catalog -------------------------------------------------------------------------

    def models(self) -> list[Urn]:
        """Every ML model that exists and is not soft-deleted, sorted."""
        found = self.search_urns("MLMODEL")
        # The search index says which models there are; their aspects say which exist.
        bundles = self._bundles(found)
        return sorted(
            urn
            for urn in found
            if ax.exists(bundles[urn].aspects) and not ax.is_removed(bundles[urn].aspects)
        )

    def indexed_models(self) -> list[Urn]:
        """Every ML model DataHub's search index lists, sorted; no aspect is read.

        See :class:`~mlcopilot.protocols.ModelIndex`: soft-deleted models are listed too.
        """
        return sorted(self.search_urns("MLMODEL"))

    def search_urns(self, entity_type: str, limit: int | None = None) -> list[Urn]:
        """Urns of one GraphQL entity type (e.g. ``MLMODEL``) from DataHub's search index.

        Soft-deleted entities are included; at most ``limit`` when given.
        """
        found: list[Urn] = []
        scroll_id: str | None = None
        page_size = min(limit, SEARCH_PAGE) if limit else SEARCH_PAGE
        while limit is None or len(found) < limit:
            variables = q.search_variables([entity_type], page_size, scroll_id)
            data = self._client.graphql("mlcopilotSearch", q.SEARCH, variables)
            page = mapping(data.get("scrollAcrossEntities"), "DataHub", "scrollAcrossEntities")
            found += result_urns(page.get("searchResults"))
            scroll_id = _next_scroll(page, scroll_id)
            if scroll_id is None:
                break
        found = list(dict.fromkeys(found))
        return found[:limit] if limit else found

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """The current metadata of each urn; an urn with no aspects gets ``exists=False``."""
        todo = [u for u in dict.fromkeys(urns) if u not in self._nodes]
        if todo and self._put_off:  # what a fetch left to translate (and slim) is asked now
            put_off, self._put_off = self._put_off, []
            self._translate(put_off)
            todo = [u for u in todo if u not in self._nodes]
        if todo:
            bundles = self._bundles(todo)
            todo = [u for u in todo if u not in self._nodes]  # what reading them translated
            slimmed = [u for u in todo if not bundles[u].whole]
            if slimmed:  # translated once, then a write cleared the nodes: read them again
                self._cache.update(self._fetch(slimmed))
                bundles = self._bundles(todo)
                todo = [u for u in todo if u not in self._nodes]
            jobs = {job for u in todo for job in ax.training_jobs(bundles[u].aspects)}
            related = {u: b.aspects for u, b in self._bundles(sorted(jobs)).items()}
            for urn in todo:
                if urn not in self._nodes:  # reading the jobs may have translated it meanwhile
                    self._nodes[urn] = _node(urn, bundles[urn], related)
        return {urn: self._nodes[urn] for urn in urns}

    def upstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop upstream of each urn, with Lite's edge semantics."""
        bundles = self._bundles(urns)
        edges: dict[Edge, None] = {}
        for urn in dict.fromkeys(urns):
            edges.update(dict.fromkeys(bundles[urn].edges(urn)))
        return list(edges)

    def lineage(self, root: Urn, limits: WalkLimits) -> Lineage:
        """The upstream lineage of ``root`` within ``limits`` (see the module docstring)."""
        self._prefetch([root], limits)
        return walk_upstream(self, root, limits)

    def downstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop downstream of each urn: the reverse of :meth:`upstream`.

        Per level, in batches: who names each urn upstream, from DataHub's relationship
        index (GraphQL ``relationships(INCOMING)`` of :data:`~queries.READERS`, many urns per
        ``entities`` query; OpenAPI ``relationships`` for an urn GraphQL has no entity for);
        those readers are fetched like any walked entity and their edges read from their
        aspects, so an edge is here exactly when :meth:`upstream` of its downstream end has
        it. A feature table's features and a job's or run's outputs come from the urn's own
        aspects. The training-data hop has no relationship: every model's
        ``mlModelTrainingData`` is read once (search, then ``batchGet``) and reversed.
        """
        wanted = [u for u in dict.fromkeys(urns) if urn_type(u) is not None]
        if not wanted:
            return []
        readers = self._readers_of(wanted)
        trained = self._training_index() if any(_is_dataset(u) for u in wanted) else {}
        sources = sorted({r for u in wanted for r in readers[u]})
        bundles = self._bundles([*wanted, *sources])
        edges: dict[Edge, None] = {}
        for urn in wanted:
            edges.update(dict.fromkeys(ax.reverse_edges_from_aspects(urn, bundles[urn].aspects)))
            for source in readers[urn]:
                edges.update(
                    dict.fromkeys(e for e in bundles[source].edges(source) if e.upstream == urn)
                )
            edges.update(dict.fromkeys(trained.get(urn, ())))
        return list(edges)

    def downstream_models(self, urn: Urn, limits: WalkLimits | None = None) -> list[Urn]:
        """The models whose upstream lineage reaches ``urn`` (:mod:`mlcopilot.lineage.downstream`).

        Who reads each urn and every model's training data are read afresh for each call,
        so a model added since the last call is found; the entities themselves are this
        instance's (one scan's) view, as for :meth:`lineage`.
        """
        self.start_reverse_walk()
        return downstream_models_of(self, urn, limits or WalkLimits())

    def start_reverse_walk(self) -> None:
        """Forget who reads what and what models trained on: the next walk reads them again."""
        self._readers.clear()
        self._trained_on = None

    def prefetch(self, roots: Sequence[Urn], limits: WalkLimits) -> None:
        """Read the lineage of every root at once: a level of all of them per batch.

        A scan of many models calls this first; each :meth:`lineage` is then served from
        this scan's cache, and an entity the models share is read once.
        """
        self._prefetch(list(dict.fromkeys(roots)), limits)

    def schema_as_of(self, urn: Urn, when: datetime) -> Schema | None:
        """The schema of the newest version written before ``when``; None if history lacks it.

        Versions are read newest first (OpenAPI ``batchGet`` with ``If-Version-Match``), at
        most :data:`MAX_HISTORY_PROBES` of them, and dated by their audit stamp (the time the
        version was written), else ``systemMetadata.lastObserved``.
        """
        return self.schemas_as_of([urn], when)[urn]

    def schemas_as_of(self, urns: Sequence[Urn], when: datetime) -> dict[Urn, Schema | None]:
        """:meth:`schema_as_of` of many urns at once (see :meth:`schemas_at`)."""
        found = self.schemas_at([(urn, when) for urn in urns])
        return {urn: found[(urn, when)] for urn in urns}

    def schemas_at(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], Schema | None]:
        """The schema of each urn as of its time: each round of the walk is one batch for all.

        The v0 envelope names the newest version but is not dated by its own write (Lite
        keeps v0's first-write time; GMS bumps ``lastObserved`` on every re-ingestion), so the
        walk starts at that version number rather than trusting v0's stamps. A scan asks for
        every model's datasets at every model's training time in one call, so a round reads
        each version needed once, however many models share a dataset. The values read are
        held only until an answer is made of them (a schema for each dataset: most of a first
        scan's memory after the walk's), and what else is known of the versions (their
        numbers, when they were written) until this call returns: a scan asks once, and what
        was kept for a later call was 157,658 entries of an estate's first scan (10,000
        models), held past its peak (let go, each later stage is 13-20 MB lower). Each answer
        is made as soon as its last version is in, batch by batch: a round of an estate's
        first scan is a hundred thousand schema versions, and almost every answer is the
        current schema, for which the values read are not needed at all.
        """
        wanted = list(dict.fromkeys(requests))
        result: dict[tuple[Urn, datetime], Schema | None] = dict.fromkeys(wanted)
        asks = [
            (key, as_of)
            for key in wanted
            if (as_of := ax.datetime_to_ms(key[1])) > 0 and urn_type(key[0]) is not None
        ]
        heads = self._read_versions(
            (urn, name, 0) for (urn, _), _ in asks for name in ax.SCHEMA_ASPECTS
        )
        found: dict[tuple[Urn, datetime], dict[str, ax.JsonObject]] = {}
        pending: dict[tuple[Urn, datetime], dict[str, int]] = {}
        times: dict[tuple[Urn, datetime], int] = {}
        older: set[tuple[Urn, datetime]] = set()
        """Keys whose answer is not simply the current value of every schema aspect."""
        for key, as_of in asks:
            current = {
                n: heads[(key[0], n, 0)] for n in ax.SCHEMA_ASPECTS if heads.get((key[0], n, 0))
            }
            if "schemaMetadata" not in current:
                continue
            found[key], times[key] = {}, as_of
            for name, version in current.items():
                assert version is not None
                written, value, newest = version
                if newest is not None:
                    pending.setdefault(key, {})[name] = newest
                elif written is not None and written < as_of and value is not None:
                    # No version number to walk from: the current value is all history can tell.
                    found[key][name] = value
                else:
                    older.add(key)

        def settle(key: tuple[Urn, datetime]) -> None:
            """Make ``key``'s answer (its versions are all in) and let its values go."""
            aspects = found.pop(key)
            node = self._nodes.get(key[0])
            if key not in older and node is not None:
                # Every schema aspect's newest version was in force then: the current schema,
                # already translated for the walk, is the answer.
                result[key] = node.schema
            elif "schemaMetadata" in aspects:
                result[key] = ax.schema_from_aspects(aspects)

        for key in [k for k in found if k not in pending]:
            settle(key)
        keys_of: dict[Urn, list[tuple[Urn, datetime]]] = {}
        for key in pending:
            keys_of.setdefault(key[0], []).append(key)
        for _ in range(MAX_HISTORY_PROBES):
            if not pending:
                break
            following: dict[tuple[Urn, datetime], dict[str, int]] = {}
            asked = (
                (key[0], name, v)
                for key, versions in pending.items()
                for name, v in versions.items()
            )
            # A round asks one version of each aspect of an urn, for all its keys at once
            # (they walk down together), so an urn's answers are complete with its batch.
            for got in self._stream_versions(asked):
                for urn in dict.fromkeys(u for u, _, _ in got):
                    for key in keys_of.get(urn, ()):
                        versions = pending.get(key)
                        if versions is None:
                            continue
                        for name, v in versions.items():
                            written, value, _ = got.get((urn, name, v)) or _NO_VERSION
                            if value is not None and written is not None and written < times[key]:
                                found[key][name] = value
                            else:
                                older.add(key)  # an earlier version, or none, was in force then
                                if v > 1:
                                    following.setdefault(key, {})[name] = v - 1
                        if key not in following:
                            settle(key)
            pending = following
        for key in list(found):
            settle(key)  # past MAX_HISTORY_PROBES: what was found is the answer, as ever
        self._versions.clear()  # a later call reads them again
        return result

    def profiles_before(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], DatasetProfile | None]:
        """For each (dataset, time): its newest profile taken at or before then, else None.

        One GraphQL ``datasetProfiles(endTimeMillis: time, limit: 1)`` per dataset, in
        ``entities`` batches, one batch series per distinct time (a scan asks at each model's
        training time, and only for datasets with no stored baseline): one profile read per
        dataset and time, never the history.
        """
        wanted = list(dict.fromkeys(requests))
        by_end: dict[int, list[Urn]] = {}
        for urn, when in wanted:
            end = ax.datetime_to_ms(when)
            if end > 0 and urn_type(urn) == "dataset" and (urn, end) not in self._profiles:
                by_end.setdefault(end, []).append(urn)
        tasks = [
            _bind(self._profiles_batch, chunk, end)
            for end, urns in by_end.items()
            for chunk in _chunks(list(dict.fromkeys(urns)), self._batch_size)
        ]
        for found in self._run(tasks):
            self._profiles.update(found)
        return {
            (urn, when): self._profiles.get((urn, ax.datetime_to_ms(when))) for urn, when in wanted
        }

    def oldest_profiles(self, urns: Sequence[Urn]) -> dict[Urn, DatasetProfile | None]:
        """Each dataset's oldest profile: Rest.li timeseries, sorted ascending, one event each.

        GraphQL's ``datasetProfiles`` only answers newest first, so a dataset's first profile
        would need its whole history; the Rest.li action sorts by ``timestampMillis`` either
        way. One request per dataset, concurrently (only datasets with no profile by their
        model's training time, on the first scan that reads them).
        """
        wanted = [u for u in dict.fromkeys(urns) if urn_type(u) == "dataset"]
        found = self._run([_bind(self._oldest_profile, urn) for urn in wanted])
        oldest = dict(zip(wanted, found, strict=True))
        return {urn: oldest.get(urn) for urn in urns}

    def _profiles_batch(
        self, urns: Sequence[Urn], end: int
    ) -> dict[tuple[Urn, int], DatasetProfile | None]:
        data = self._client.graphql(
            "mlcopilotProfilesBefore", q.PROFILES_BEFORE, {"urns": list(urns), "end": end}
        )
        found: dict[tuple[Urn, int], DatasetProfile | None] = dict.fromkeys(
            ((u, end) for u in urns), None
        )
        for entity in data.get("entities") or []:
            if isinstance(entity, Mapping) and isinstance(entity.get("urn"), str):
                raw = _first_profile(entity.get("datasetProfiles"))
                found[(entity["urn"], end)] = ax.dataset_profile(raw)
        return found

    def _oldest_profile(self, urn: Urn) -> DatasetProfile | None:
        events = self._client.timeseries(urn, ax.PROFILE_ASPECT, limit=1, oldest_first=True)
        return ax.dataset_profile(events[0]) if events else None

    def contacts(self, owners: Sequence[Urn]) -> dict[Urn, Contact]:
        """How to reach each owner DataHub holds (:class:`~mlcopilot.protocols.OwnerDirectory`).

        GraphQL ``entities(urns:)`` of ``CorpUser`` and ``CorpGroup``, ``batch_size`` owners a
        query, the batches concurrent (:mod:`~mlcopilot.catalog.datahub.owners`); each call is
        held to its own deadline and to :meth:`walk_until`'s. Read fresh on every call.
        """
        return read_contacts(self._client, owners, batch_size=self._batch_size, run=self._run)

    def apply(self, writes: Sequence[Write], *, dry_run: bool = False) -> list[Write]:
        """Make DataHub hold ``writes``; return those that changed something.

        Exactly Lite's semantics: writes to one entity fold in order, missing tags and
        structured property definitions are created, and re-applying returns ``[]``. What is
        there is read fresh (not from this scan's cache), and only changed aspects are
        emitted, in one batch: tags and structured properties as PATCHes of just the entries
        changed, so what someone else writes meanwhile stays (see
        :mod:`mlcopilot.catalog.proposals`); incidents, documents and definitions as UPSERTs
        of deterministic urns — never ``raiseIncident``, which would make a new incident on
        every retry. Documents need DataHub ≥ 1.4; on an older server they
        are skipped, logged and listed in :attr:`skipped_writes`. An incident naming an entity
        type this DataHub refuses names the others (:meth:`fit_incidents`), and is reported as
        given. A dry run compares :data:`WRITE_SLICE` writes at a time (:meth:`_changed`).
        """
        wanted, self.skipped_writes = aspect_writes.gate_documents(writes, self._client, self.label)
        fitted = self.fit_incidents(wanted)
        self.skipped_writes += fitted.skipped
        sent = fitted.sent
        if dry_run:
            return fitted.reported(self._changed(sent))
        folded = aspect_writes.fold(sent, self.write_state(aspect_writes.state_needs(sent)))
        aspect_writes.check_writable(folded.pending)
        if folded.pending:
            self._emit(folded.pending, folded.read())
        return fitted.reported(folded.changed)

    def _changed(self, writes: Sequence[Write]) -> list[Write]:
        """The writes that would change something, :data:`WRITE_SLICE` at a time (a dry run).

        Each slice is folded into the state of what it touches, read for it, and what the
        slices before it changed there: what one fold of all of them reports, and refuses
        (a dry run refuses what the real one would), without holding every aspect of the
        write-back at once (an estate's is a million, most of a large scan's peak memory).
        """
        slices = [writes[i : i + WRITE_SLICE] for i in range(0, len(writes), WRITE_SLICE)]
        # Each part's needs are worked out here and again in its turn, never all held at once.
        shared = _needed_again(aspect_writes.state_needs(part) for part in slices)
        carried: dict[Urn, dict[str, ax.JsonObject]] = {}
        changed: list[Write] = []
        for index, part in enumerate(slices):
            state = self.write_state(aspect_writes.state_needs(part))
            for urn, values in carried.items():
                state.setdefault(urn, {}).update(values)
            folded = aspect_writes.fold(part, state)
            aspect_writes.check_writable(folded.pending)
            changed += folded.changed
            for (urn, name), value in folded.pending.items():
                if shared.get(hash(urn), index) > index:
                    carried.setdefault(urn, {})[name] = value
            carried = {u: v for u, v in carried.items() if shared.get(hash(u), index) > index}
        return changed

    def walk_until(self, deadline: float | None) -> None:
        """Start no call to GMS past ``deadline`` and end every one by then (None: no bound).

        :class:`~mlcopilot.protocols.TimedWalk`: the bound of a scan's walk, on top of each
        call's own deadline; the worker threads share it.
        """
        self._client.until = deadline

    def close(self) -> None:
        """Release connections and worker threads."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self._client.close()

    def incident_status(self, urns: Sequence[Urn]) -> dict[Urn, tuple[str, str | None, int]]:
        """``urn -> (state, stage, number of assignees)`` for the incidents that exist.

        How people triaged our incidents in DataHub (stage, assignees) is how an
        acknowledgement made in DataHub's UI reaches mlcopilot. Read fresh, in batches, up to
        ``max_workers`` at once: one at a time, a full rescan of ``make bench``'s 1,000-model
        estate (then asking about every member of each group it touched: 77 requests a batch of
        250 models) took one watcher 28.7 s, and 21.4-26.8 s in six runs four at a time
        (``benchmarks/rescan.py``).
        """
        found: dict[Urn, tuple[str, str | None, int]] = {}
        tasks = [
            _bind(
                self._client.batch_get, "incident", [{"urn": u, "incidentInfo": {}} for u in chunk]
            )
            for chunk in _chunks(list(dict.fromkeys(urns)), self._batch_size)
        ]
        for entities in self._run(tasks):
            for entity in entities:
                envelope = entity.get("incidentInfo")
                info = envelope.get("value") if isinstance(envelope, Mapping) else None
                if isinstance(entity.get("urn"), str) and isinstance(info, Mapping):
                    status = info.get("status") or {}
                    found[entity["urn"]] = (
                        str(status.get("state", "")),
                        status.get("stage"),
                        len(info.get("assignees") or []),
                    )
        return found

    def incident_entity_types(self) -> frozenset[str]:
        """Entity types an incident may name here (:class:`~mlcopilot.protocols.IncidentTargets`).

        Datasets, jobs, flows, charts, dashboards and columns on every DataHub; ML models and
        features since PR #19112, feature tables since #19367 (see :meth:`incident_support`).
        """
        return self.incident_support().entity_types

    def incident_support(self) -> IncidentSupport:
        """Which ML types take incidents here, asked once (GraphQL introspection).

        An ML type counts where its GraphQL type has ``incidents``: the PRs that added the
        field also allowed the type in ``incidentInfo.entities``, and before them GMS refuses
        the write. A server that cannot be asked (introspection off, a failure) counts as
        taking none, which is said in the log; never raises.
        """
        if self._incident_support is None:
            self._incident_support = self._ask_incident_support()
        return self._incident_support

    def _ask_incident_support(self) -> IncidentSupport:
        try:
            data = self._client.graphql("mlcopilotIncidentTypes", _INCIDENT_FIELDS, {})
        except CatalogError as exc:  # CatalogUnavailable too: a write-back then says it again
            log.warning(
                "%s: cannot tell whether DataHub takes incidents on ML entities (%s); "
                "incidents name the upstream entity only",
                self.label,
                exc,
            )
            return IncidentSupport(ml_types=(), unknown=str(exc))
        found = tuple(
            name
            for name in ML_INCIDENT_TYPES
            if any(
                isinstance(f, Mapping) and f.get("name") == "incidents"
                for f in (_object(data.get(name)).get("fields") or [])
            )
        )
        if not found:
            log.info(
                "%s: DataHub before PR #19112 takes no incidents on ML entities: incidents "
                "name the upstream entity only",
                self.label,
            )
        return IncidentSupport(ml_types=found)

    def fit_incidents(self, writes: Sequence[Write]) -> FittedIncidents:
        """``writes`` with each incident naming only entity types this DataHub accepts.

        GMS refuses a whole write naming another type. The write-back plans for the server
        (:func:`~mlcopilot.incidents.writeback.plan_writeback`); this keeps a plan made without
        asking it (a hand resolution, an older outbox row) from failing: an incident names the
        rest, or is skipped (and logged) when nothing is left. The server is asked only when an
        incident names a type not every DataHub accepts.
        """
        if all(
            not isinstance(w, IncidentWrite)
            or all(urn_type(u) in INCIDENTS_ON_EVERY_DATAHUB for u in w.entities)
            for w in writes
        ):
            return FittedIncidents(sent=list(writes), skipped=())
        accepted = self.incident_entity_types()
        sent: list[Write] = []
        narrowed: dict[int, Write] = {}
        skipped: list[IncidentWrite] = []
        for write in writes:
            if not isinstance(write, IncidentWrite):
                sent.append(write)
                continue
            entities = tuple(u for u in write.entities if urn_type(u) in accepted)
            if entities == write.entities:
                sent.append(write)
            elif entities:
                fitted = replace(write, entities=entities)
                narrowed[id(fitted)] = write
                sent.append(fitted)
            else:
                skipped.append(write)
        if skipped:
            log.warning(
                "%s: DataHub takes no incident on %s; skipped %d incident write(s)",
                self.label,
                ", ".join(sorted({urn_type(u) or u for w in skipped for u in w.entities})),
                len(skipped),
            )
        return FittedIncidents(sent=sent, skipped=tuple(skipped), narrowed=narrowed)

    # --- setup and doctor ----------------------------------------------------------------

    def server_info(self) -> ServerInfo:
        """The server's version and whether it has Documents (``GET /config``)."""
        config = self._client.server_config()
        return ServerInfo(
            version=config.service_version,
            cloud=config.is_datahub_cloud,
            documents=self._client.supports_documents(),
        )

    def whoami(self) -> Identity:
        """Who the token is (GraphQL ``me``); CatalogError when the token is refused."""
        data = self._client.graphql("mlcopilotMe", q.ME, {})
        me = data.get("me") if isinstance(data.get("me"), Mapping) else {}
        user = (me.get("corpUser") or {}).get("username") if isinstance(me, Mapping) else None
        raw = me.get("platformPrivileges") if isinstance(me, Mapping) else None
        privileges = dict(raw) if isinstance(raw, Mapping) else {}
        return Identity(user=user if isinstance(user, str) else None, privileges=privileges)

    def edit_privileges(self, urns: Sequence[Urn]) -> dict[Urn, dict[str, bool | None]]:
        """What the token may edit on each urn (a read: GraphQL ``privileges``)."""
        if not urns:
            return {}
        data = self._client.graphql("mlcopilotPrivileges", q.PRIVILEGES, {"urns": list(urns)})
        result: dict[Urn, dict[str, bool | None]] = {}
        for entity in data.get("entities") or []:
            if isinstance(entity, Mapping) and isinstance(entity.get("privileges"), Mapping):
                result[str(entity["urn"])] = dict(entity["privileges"])
        return result

    def missing_definitions(self, definitions: Sequence[Definition]) -> list[Urn]:
        """The urns of ``definitions`` DataHub does not hold yet (read fresh)."""
        bundles = self._bundles([d.urn for d in definitions], refresh=True)
        return [d.urn for d in definitions if _definition_aspect(d) not in bundles[d.urn].aspects]

    def ensure_definitions(
        self, definitions: Sequence[Definition], *, dry_run: bool = False
    ) -> list[Urn]:
        """Create each definition DataHub lacks; return the urns created (idempotent).

        An existing definition is never overwritten, so descriptions edited in DataHub stay.
        """
        missing = set(self.missing_definitions(definitions))
        pending = {
            (d.urn, _definition_aspect(d)): _definition_json(d)
            for d in definitions
            if d.urn in missing
        }
        if pending and not dry_run:
            self._emit(pending, {})
        return [d.urn for d in definitions if d.urn in missing]

    # --- reading -------------------------------------------------------------------------

    def _bundles(
        self, urns: Iterable[Urn], *, refresh: bool = False, walked: bool = False
    ) -> dict[Urn, _Bundle]:
        wanted = list(dict.fromkeys(urns))
        todo = [u for u in wanted if refresh or u not in self._cache]
        if todo:
            if refresh:
                self._nodes.clear()  # a node may translate a refreshed bundle (a model's run)
            self._cache.update(self._fetch(todo, walked=walked))
        return {u: self._cache[u] for u in wanted}

    def write_state(self, urns: Iterable[Urn]) -> dict[Urn, dict[str, ax.JsonObject]]:
        """What a write-back compares with, read fresh: only those aspects, in batches.

        OpenAPI ``batchGet`` of :data:`~mlcopilot.catalog.aspects.WRITE_ASPECTS` for every
        type: a write-back touches thousands of entities (one incident and one document per
        finding, a tag per risky entity), and their lineage, operations and relationships are
        not compared.
        """
        by_type: dict[str, list[Urn]] = {}
        for urn in dict.fromkeys(urns):
            entity_type = urn_type(urn)
            if entity_type is not None and _write_aspects(entity_type):
                by_type.setdefault(entity_type, []).append(urn)
        tasks = [
            _bind(self._openapi_batch, entity_type, chunk, _write_aspects(entity_type))
            for entity_type, of_type in by_type.items()
            for chunk in _chunks(of_type, max(SMALL_BATCH, self._batch_size))
        ]
        state: dict[Urn, dict[str, ax.JsonObject]] = {}
        for partial in self._run(tasks):
            for urn, bundle in partial:
                state.setdefault(urn, {}).update(bundle.aspects)
        return state

    def _fetch(self, urns: Sequence[Urn], *, walked: bool = False) -> dict[Urn, _Bundle]:
        """Read ``urns`` in batches, concurrently: GraphQL for most, OpenAPI for the rest.

        Each entity is translated as soon as its last batch is in, while the other batches
        are still on the wire: the translation overlaps the waiting instead of following it.
        The last batch's entities, which nothing would overlap, are put off until the next
        fetch has sent its requests (a walk's next level), else until :meth:`nodes` asks for
        them. (Models with training runs wait for :meth:`nodes`: they need the runs' aspects.)
        ``walked``: the entities are a lineage prefetch's, each slimmed once translated
        (:meth:`_Bundle.slim`).
        """
        bundles = {urn: _Bundle() for urn in urns}
        graphql: list[Urn] = []
        openapi: dict[str, list[Urn]] = {}
        parts: dict[Urn, int] = {}
        for urn in urns:
            entity_type = urn_type(urn)
            if entity_type is None:
                continue  # not an urn GMS could know: no aspects, exists=False
            if entity_type in q.RELATIONSHIP_TYPES:
                graphql.append(urn)
                parts[urn] = parts.get(urn, 0) + 1
            if entity_type not in q.GRAPHQL_TYPES and _openapi_aspects(entity_type):
                openapi.setdefault(entity_type, []).append(urn)
                parts[urn] = parts.get(urn, 0) + 1
        tasks: list[Callable[[], list[tuple[Urn, _Bundle]]]] = [
            _bind(self._graphql_batch, chunk) for chunk in _chunks(graphql, self._batch_size)
        ]
        tasks += [
            _bind(self._openapi_batch, entity_type, chunk)
            for entity_type, of_type in openapi.items()
            for chunk in _chunks(of_type, self._batch_size)
        ]
        put_off, self._put_off = self._put_off, []
        waiting = len(tasks)
        for partial in self._completed(tasks, meanwhile=lambda: self._translate(put_off)):
            waiting -= 1
            for urn, part in partial:
                if urn not in bundles:
                    continue
                _merge(bundles[urn], part)
                parts[urn] -= 1
                aspects = bundles[urn].aspects
                if parts[urn] == 0 and not ax.training_jobs(aspects):
                    if waiting:
                        self._translate([(urn, bundles[urn], walked)], cached=False)
                    else:
                        self._put_off.append((urn, bundles[urn], walked))
        return bundles

    def _translate(
        self, entities: Iterable[tuple[Urn, _Bundle, bool]], *, cached: bool = True
    ) -> None:
        """Translate entities read, keeping the nodes (failures are left for :meth:`nodes`).

        Each is ``(urn, bundle, slim)``: with ``slim``, the bundle keeps only what is read of
        it once translated (a model's, all of it). ``cached``: each bundle is translated only
        while it is still the one in the cache (a write or a refresh since may have replaced
        it, and cleared the nodes).
        """
        for urn, bundle, slim in entities:
            if urn in self._nodes or (cached and self._cache.get(urn) is not bundle):
                continue
            # A failure is reported by nodes(), if the entity is ever asked for.
            with suppress(CatalogError):
                self._nodes[urn] = _node(urn, bundle, {})
                if slim and urn_type(urn) not in _WHOLE_TYPES:
                    bundle.slim(urn)

    def _graphql_batch(self, urns: Sequence[Urn]) -> list[tuple[Urn, _Bundle]]:
        variables = q.entities_variables(urns, READ_ASPECTS)
        data = self._client.graphql("mlcopilotEntities", q.ENTITIES, variables)
        result: list[tuple[Urn, _Bundle]] = []
        for entity in data.get("entities") or []:
            if not isinstance(entity, Mapping) or not isinstance(entity.get("urn"), str):
                continue  # GMS answers null for an urn it has nothing on
            urn = entity["urn"]
            bundle = _Bundle(aspects=_raw_aspects(urn, entity.get("aspects")))
            operation = _operation(entity.get("operations"))
            if operation is not None:
                bundle.aspects["operation"] = operation
            if "operations" in entity:
                bundle.updates = _update_stamps(entity.get("operations"))
            bundle.profile = _first_profile(entity.get("datasetProfiles"))
            bundle.producers = self._related(urn, entity.get("producers"), q.PRODUCES)
            bundle.tables = self._related(urn, entity.get("tables"), q.CONTAINS)
            if "assertions" in entity:
                bundle.assertions = self._assertions(urn, entity.get("assertions"))
            if "incidents" in entity:
                bundle.incidents = self._incidents(urn, entity.get("incidents"))
            result.append((urn, bundle))
        return result

    def _assertions(self, urn: Urn, page: object) -> list[_RawAssertion]:
        """A dataset's assertions with their latest runs, following further pages."""
        found: list[_RawAssertion] = []
        pages = self._pages(urn, page, "assertions", "mlcopilotAssertions", "assertionStart")
        for item in pages:
            if isinstance(item, Mapping) and isinstance(item.get("urn"), str):
                found.append(
                    (
                        item["urn"],
                        _raw_aspects(item["urn"], item.get("aspects")),
                        _run_event(item.get("runEvents")),
                    )
                )
        return found

    def _incidents(self, urn: Urn, page: object) -> list[tuple[Urn, ax.JsonObject]]:
        """An entity's active incidents as ``incidentInfo`` JSON, following further pages."""
        return [
            (item["urn"], _incident_info(item))
            for item in self._pages(urn, page, "incidents", "mlcopilotIncidents", "incidentStart")
            if isinstance(item, Mapping) and isinstance(item.get("urn"), str)
        ]

    def _pages(
        self, urn: Urn, page: object, key: str, operation: str, start_variable: str
    ) -> Iterator[object]:
        """The items of a ``{start count total <key>}`` page and of the pages after it."""
        while isinstance(page, Mapping):
            items = page.get(key)
            items = items if isinstance(items, list) else []
            yield from items
            # ``count`` is what GMS read (soft-deleted assertions read, then dropped, count).
            start = as_int(page.get("start")) + max(as_int(page.get("count")), len(items))
            if start <= as_int(page.get("start")) or start >= as_int(page.get("total")):
                break
            variables = {"urn": urn, start_variable: start}
            data = self._client.graphql(operation, q.DOCUMENTS[operation], variables)
            entity = data.get("entity")
            page = entity.get(key) if isinstance(entity, Mapping) else None

    def _related(
        self,
        urn: Urn,
        page: object,
        types: Sequence[str],
        keep: Callable[[Urn, set[str]], bool] | None = _holds,
    ) -> list[Urn]:
        """Source urns of incoming ``types`` relationships, following further pages.

        ``keep`` picks the sources of the types the hop counts (None: every source).
        """
        holders: list[Urn] = []
        while isinstance(page, Mapping):
            relationships = page.get("relationships") or []
            holders += _relationship_sources(relationships, types, keep)
            start = as_int(page.get("start")) + len(relationships)
            if not relationships or start >= as_int(page.get("total")):
                break
            data = self._client.graphql(
                "mlcopilotRelationships",
                q.RELATIONSHIPS,
                {"urn": urn, "input": q.incoming(types, start)},
            )
            entity = data.get("entity")
            page = entity.get("relationships") if isinstance(entity, Mapping) else None
        return holders

    def _readers_of(self, urns: Sequence[Urn]) -> dict[Urn, list[Urn]]:
        """Who names each urn upstream (incoming :data:`~queries.READERS`), in batches."""
        todo = [u for u in urns if u not in self._readers]
        tasks = [
            _bind(self._readers_batch, chunk)
            for chunk in _chunks(todo, max(SMALL_BATCH, self._batch_size))
        ]
        for found in self._run(tasks):
            self._readers.update(found)
        # GraphQL answers null for an urn with no aspects (a referenced, never ingested urn)
        # and has no entity for some types; the relationship index still has edges to them.
        unanswered = [u for u in todo if u not in self._readers]
        found_each = self._run([_bind(self._readers_openapi, u) for u in unanswered])
        self._readers.update(zip(unanswered, found_each, strict=True))
        return {u: self._readers[u] for u in urns}

    def _readers_batch(self, urns: Sequence[Urn]) -> dict[Urn, list[Urn]]:
        data = self._client.graphql(
            "mlcopilotDownstream", q.DOWNSTREAM, q.downstream_variables(urns)
        )
        found: dict[Urn, list[Urn]] = {}
        for entity in data.get("entities") or []:
            if (
                isinstance(entity, Mapping)
                and isinstance(entity.get("urn"), str)
                and "readers" in entity
            ):
                urn = entity["urn"]
                found[urn] = self._related(urn, entity.get("readers"), q.READERS, keep=None)
        return found

    def _readers_openapi(self, urn: Urn) -> list[Urn]:
        """:meth:`_readers_batch` for one urn GraphQL could not answer, page by page."""
        holders: list[Urn] = []
        start = 0
        while True:
            page = self._client.incoming(urn, q.READERS, start=start, count=q.RELATIONSHIP_PAGE)
            entities = page.get("entities")
            entities = entities if isinstance(entities, list) else []
            holders += [
                e["urn"]
                for e in entities
                if isinstance(e, Mapping)
                and isinstance(e.get("urn"), str)
                and e.get("relationshipType") in q.READERS
            ]
            start += len(entities)
            if not entities or start >= as_int(page.get("total")):
                return list(dict.fromkeys(holders))

    def _training_index(self) -> dict[Urn, list[Edge]]:
        """Every model's ``training_data`` edges by dataset (DataHub indexes none of them).

        The models come from the search index, soft-deleted ones included (a training run
        may read a soft-deleted model); a model already read this scan is not read again, the
        rest are read in ``batchGet`` batches of just ``mlModelTrainingData``.
        """
        if self._trained_on is not None:
            return self._trained_on
        models = self.search_urns("MLMODEL")
        held: dict[Urn, ax.Aspects] = {
            u: self._cache[u].aspects for u in models if u in self._cache
        }
        todo = [u for u in models if u not in held]
        names = ["mlModelTrainingData"]
        tasks = [
            _bind(self._openapi_batch, "mlModel", chunk, names)
            for chunk in _chunks(todo, max(SMALL_BATCH, self._batch_size))
        ]
        for partial in self._run(tasks):
            held.update((urn, bundle.aspects) for urn, bundle in partial)
        index: dict[Urn, list[Edge]] = {}
        for model in sorted(held):
            training = held[model].get("mlModelTrainingData")
            if training is None:
                continue
            for edge in ax.edges_from_aspects(model, {"mlModelTrainingData": training}):
                index.setdefault(edge.upstream, []).append(edge)
        self._trained_on = index
        return index

    def _openapi_batch(
        self, entity_type: str, urns: Sequence[Urn], names: Sequence[str] | None = None
    ) -> list[tuple[Urn, _Bundle]]:
        names = _openapi_aspects(entity_type) if names is None else names
        items = [{"urn": urn, **{name: {} for name in names}} for urn in urns]
        result: list[tuple[Urn, _Bundle]] = []
        for entity in self._client.batch_get(entity_type, items):
            urn = entity.get("urn")
            if isinstance(urn, str):
                result.append((urn, _Bundle(aspects=envelope_values(entity, names))))
        return result

    def _read_versions(
        self, wanted: Iterable[tuple[Urn, str, int]]
    ) -> dict[tuple[Urn, str, int], _Version | None]:
        """Some versions of some aspects, from this scan's cache or in batches."""
        keys = list(dict.fromkeys(wanted))
        tasks = self._version_tasks(k for k in keys if k not in self._versions)
        for found in self._run(tasks):
            self._versions.update(found)
        return {key: self._versions.get(key) for key in keys}

    def _stream_versions(
        self, wanted: Iterable[tuple[Urn, str, int]]
    ) -> Iterator[dict[tuple[Urn, str, int], _Version | None]]:
        """:meth:`_read_versions`, a batch at a time, as each is in; values are not kept.

        What the cache holds is given first. Versions with a value are not cached (an answer
        is made of them as they come); the others are, until :meth:`schemas_at` returns.
        """
        keys = list(dict.fromkeys(wanted))
        # An urn is answered from the cache only when all of it is there, so that each urn
        # comes whole, in one of the dicts yielded.
        unheld = {urn for urn, name, version in keys if (urn, name, version) not in self._versions}
        held = {k: self._versions[k] for k in keys if k[0] not in unheld}
        if held:
            yield held
        tasks = self._version_tasks(k for k in keys if k[0] in unheld)
        for found in self._completed(tasks):
            self._versions.update((k, v) for k, v in found.items() if v is None or v[1] is None)
            yield found

    def _version_tasks(
        self, wanted: Iterable[tuple[Urn, str, int]]
    ) -> list[Callable[[], dict[tuple[Urn, str, int], _Version | None]]]:
        """One ``batchGet`` task per entity type and chunk of each layer of ``wanted``."""
        return [
            _bind(self._version_batch, entity_type, chunk)
            for layer in _version_layers(wanted)
            for entity_type, items in layer.items()
            for chunk in _chunks(list(items.items()), max(SMALL_BATCH, self._batch_size))
        ]

    def _version_batch(
        self, entity_type: str, items: Sequence[tuple[Urn, dict[str, int]]]
    ) -> dict[tuple[Urn, str, int], _Version | None]:
        """One ``batchGet`` of given versions (``If-Version-Match``), with system metadata."""
        body = [
            {
                "urn": urn,
                **{n: {"headers": {"If-Version-Match": str(v)}} for n, v in versions.items()},
            }
            for urn, versions in items
        ]
        entities = {
            e.get("urn"): e for e in self._client.batch_get(entity_type, body, system_metadata=True)
        }
        found: dict[tuple[Urn, str, int], _Version | None] = {}
        for urn, versions in items:
            entity = entities.get(urn) or {}
            for name, version in versions.items():
                envelope = entity.get(name)
                if not isinstance(envelope, dict) or not isinstance(envelope.get("value"), dict):
                    found[(urn, name, version)] = None
                    continue
                newest = _newest_row(envelope) if version == 0 else None
                value = envelope["value"] if newest is None else None
                found[(urn, name, version)] = (written_at(envelope), value, newest)
        return found

    # --- lineage prefetch ----------------------------------------------------------------

    def _prefetch(self, roots: Sequence[Urn], limits: WalkLimits) -> None:
        """Load everything upstream of ``roots`` into the cache, a level per round.

        Each round fetches the level's urns not yet cached, in concurrent batches, so the
        cost follows the unique entities, not models × paths. After :data:`DEEP_LEVELS`
        narrow rounds in a row (at most :data:`SCROLL_ROOTS` urns to fetch), the frontier is
        scrolled from instead: DataHub's lineage index names everything further up at once,
        and the rounds after that find it cached. Caps as the walk's: ``max_hops`` levels,
        ``max_nodes`` per root.
        """
        degrees = tuple(q.degrees_for(limits.max_hops))
        budget = limits.max_nodes * max(1, len(roots))
        examined: set[Urn] = set()
        frontier = list(roots)
        narrow = 0
        for level in range(max(0, limits.max_hops) + 1):
            missing = [u for u in frontier if u not in self._cache]
            if missing:
                narrow = narrow + 1 if len(missing) <= SCROLL_ROOTS else 0
                found: list[Urn] = []
                if narrow > DEEP_LEVELS:
                    scrollable = [u for u in missing if urn_type(u) not in NO_LINEAGE]
                    found = self._scroll_all(scrollable, degrees, limits.max_nodes)
                self._bundles([*missing, *found], walked=True)
            examined.update(frontier)
            if level >= limits.max_hops or len(examined) >= budget:
                break
            frontier = list(
                dict.fromkeys(
                    edge.upstream
                    for urn in frontier
                    for edge in self._cache[urn].edges(urn)
                    if edge.upstream not in examined
                )
            )
            if not frontier:
                break

    def _scroll_all(self, roots: Sequence[Urn], degrees: tuple[str, ...], limit: int) -> list[Urn]:
        todo = [r for r in roots if (r, degrees) not in self._scrolled]
        if self._scroll_given_up is not None:
            results: list[list[Urn]] = [[] for _ in todo]
        elif self._find_lineage is not None:
            results = self._find_lineage(todo, len(degrees), limit) if todo else []
        else:
            results = self._run([_bind(self._scroll_or_nothing, r, degrees, limit) for r in todo])
        for root, found in zip(todo, results, strict=True):
            self._scrolled[(root, degrees)] = found
        return [u for r in roots for u in self._scrolled[(r, degrees)]]

    def _scroll_or_nothing(self, root: Urn, degrees: tuple[str, ...], limit: int) -> list[Urn]:
        """:meth:`_scroll`, or what it found before GMS refused it; the walk fetches the rest.

        The scroll only saves requests: the walk reads every edge from the aspects (current
        at once), so a scroll that is cut short, partial, stale or lagging loses nothing but
        speed. GMS refuses a lineage past ``maxRelations`` (40,000 entities) or its 50 s graph
        timeout with an error unless partial results are on (then ``isPartial``); its rate
        limit answers 429 with a ``Retry-After`` of a minute or more. Each page gets one
        attempt's time (:attr:`GmsClient.timeout`): a quick retry still happens, but a long
        ``Retry-After`` or a walk running into GMS's timeout is not waited for. An unreachable
        or broken server still fails the scan.
        """
        found: list[Urn] = []
        try:
            self._scroll(root, degrees, limit, found)
        except CatalogUnavailable as exc:
            why = gave_way(exc)
            if why is None:
                raise
            if self._scroll_given_up is None:
                log.warning(
                    "%s: lineage scroll from %s given up (%s); walking level by level, and not "
                    "asking DataHub's lineage search again this scan",
                    self.label,
                    root,
                    why,
                )
            self._scroll_given_up = why
        except CatalogError as exc:
            log.warning(
                "%s: no lineage scroll from %s (%s); walking level by level", self.label, root, exc
            )
        return found

    def _scroll(
        self, root: Urn, degrees: tuple[str, ...], limit: int, found: list[Urn]
    ) -> list[Urn]:
        """Everything DataHub's lineage index has upstream of ``root``, appended to ``found``.

        Page by page, always with ``searchFlags.skipCache`` (:func:`~queries.lineage_variables`):
        GMS would otherwise answer from a walk it cached up to ``CACHE_TTL_SECONDS`` ago.
        """
        scroll_id: str | None = None
        while len(found) < limit:
            variables = q.lineage_variables(root, degrees, self._lineage_page, scroll_id)
            with within(self._client.timeout):
                data = self._client.graphql("mlcopilotLineage", q.LINEAGE, variables)
            page = data.get("scrollAcrossLineage")
            if not isinstance(page, Mapping):
                break  # GMS answers null for an urn it has no lineage document for
            found += result_urns(page.get("searchResults"))
            if page.get("isPartial"):
                # Hit GMS's relation cap or graph timeout; the walk fetches what is missing.
                log.info("%s: DataHub's lineage of %s is partial", self.label, root)
            scroll_id = _next_scroll(page, scroll_id)
            if scroll_id is None:
                break
        return found

    # --- writing -------------------------------------------------------------------------

    def _emit(
        self,
        pending: Mapping[tuple[Urn, str], ax.JsonObject],
        read: Mapping[tuple[Urn, str], ax.JsonObject | None],
    ) -> None:
        """Send ``pending`` (:func:`~mlcopilot.catalog.aspect_writes.send`); forget what it was."""
        try:
            aspect_writes.send(self._client, self.label, pending, read)
        finally:
            # Whatever happened, what DataHub holds for these urns is no longer what we read.
            for urn, _ in pending:
                self._cache.pop(urn, None)
            self._nodes.clear()
            self._versions.clear()

    # --- plumbing ------------------------------------------------------------------------

    def _run(self, tasks: Sequence[Callable[[], _R]]) -> list[_R]:
        """Run ``tasks`` with at most ``max_workers`` in flight; results in task order."""
        if len(tasks) <= 1 or self._max_workers == 1:
            return [task() for task in tasks]
        return list(self._pool().map(lambda task: task(), tasks))

    def _pool(self) -> ThreadPoolExecutor:
        """The scan's worker threads, started on first use."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix="mlcopilot-datahub"
            )
        return self._executor

    def _completed(
        self, tasks: Sequence[Callable[[], _R]], meanwhile: Callable[[], None] | None = None
    ) -> Iterator[_R]:
        """Run ``tasks`` like :meth:`_run`; yield each result as soon as it is in.

        ``meanwhile`` runs once, as soon as the tasks are on their way. At most twice
        ``max_workers`` tasks are started and not yet taken: the next starts as one is taken,
        so results read faster than they are used wait on the wire, not in memory (a level
        of an estate's walk is a hundred batches of a few megabytes each).
        """
        if not tasks or self._max_workers == 1 or (len(tasks) == 1 and meanwhile is None):
            if meanwhile is not None:
                meanwhile()
            yield from (task() for task in tasks)
            return
        pool = self._pool()
        waiting = iter(tasks)
        running: set[Future[_R]] = set()

        def start(count: int) -> None:
            for task in waiting:
                running.add(pool.submit(task))
                count -= 1
                if count <= 0:
                    return

        start(2 * self._max_workers)
        try:
            if meanwhile is not None:
                meanwhile()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    running.discard(future)
                    yield future.result()
                    start(1)
        finally:
            for future in running:
                future.cancel()  # after a failure, what has not started need not


# --- helpers --------------------------------------------------------------------------------


def _bind(function: Callable[..., _R], *args: Any) -> Callable[[], _R]:
    return lambda: function(*args)


def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _write_aspects(entity_type: str) -> list[str]:
    """The aspects of :data:`~mlcopilot.catalog.aspects.WRITE_ASPECTS` ``entity_type`` has."""
    return aspects_among(entity_type, ax.WRITE_ASPECTS)


def _openapi_aspects(entity_type: str) -> list[str]:
    """The aspects of :data:`READ_ASPECTS` that ``entity_type`` has (none if unknown)."""
    return aspects_among(entity_type, READ_ASPECTS)


_NO_VERSION: _Version = (None, None, None)
"""What a version GMS did not send is taken as: not written, no value."""


def _version_layers(
    keys: Iterable[tuple[Urn, str, int]],
) -> list[dict[str, dict[Urn, dict[str, int]]]]:
    """``keys`` as ``batchGet`` items by entity type and urn, in as few layers as can be.

    An item names each aspect of its urn once: two versions of one aspect (models trained at
    different times) go in separate layers (batches), and responses stay by urn.
    """
    layers: list[dict[str, dict[Urn, dict[str, int]]]] = []
    for urn, name, version in keys:
        entity_type = urn_type(urn)
        if entity_type is None:
            continue
        for layer in layers:
            item = layer.setdefault(entity_type, {}).setdefault(urn, {})
            if name not in item:
                item[name] = version
                break
        else:
            layers.append({entity_type: {urn: {name: version}}})
    return layers


def _merge(into: _Bundle, part: _Bundle) -> None:
    into.aspects.update(part.aspects)
    into.producers += part.producers
    into.tables += part.tables
    if part.assertions is not None:
        into.assertions = [*(into.assertions or []), *part.assertions]
    if part.incidents is not None:
        into.incidents = [*(into.incidents or []), *part.incidents]
    if part.updates is not None:
        into.updates = [*(into.updates or []), *part.updates]
    if part.profile is not None:
        into.profile = part.profile


def _raw_aspects(urn: Urn, raw: object) -> dict[str, ax.JsonObject]:
    aspects: dict[str, ax.JsonObject] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or not item.get("payload"):
            continue
        try:
            value = loads(item["payload"])  # a JSON string inside the JSON answer
        except (TypeError, ValueError) as exc:
            raise CatalogError(
                f"DataHub sent a malformed {item.get('aspectName')} aspect for {urn}: {exc}"
            ) from exc
        if isinstance(value, dict):
            aspects[str(item.get("aspectName"))] = value
    return aspects


def _operation(raw: object) -> ax.JsonObject | None:
    """The latest ``operation`` (a timeseries aspect) in its aspect JSON form."""
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], Mapping):
        return None
    latest = raw[0]
    if latest.get("lastUpdatedTimestamp") is None:
        return None
    keys = ("timestampMillis", "lastUpdatedTimestamp", "operationType", "customOperationType")
    return {k: latest[k] for k in keys if latest.get(k) is not None}


def _first_profile(raw: object) -> ax.JsonObject | None:
    """The first (newest) profile of a GraphQL ``datasetProfiles`` answer, if any."""
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        return raw[0]
    return None


def _update_stamps(raw: object) -> list[int]:
    """When the data changed, by each of the ``operations`` GraphQL returned (epoch ms)."""
    stamps = (
        (ax.update_stamps("operation", item) for item in raw if isinstance(item, Mapping))
        if isinstance(raw, list)
        else ()
    )
    return [s for s in stamps if s is not None]


def _run_event(raw: object) -> ax.JsonObject | None:
    """The run ``runEvents(status: COMPLETE, limit: 1)`` returned, as ``assertionRunEvent`` JSON.

    GraphQL's ``[{key value}]`` lists become JSON objects, as the aspect stores them.
    """
    events = raw.get("runEvents") if isinstance(raw, Mapping) else None
    if not isinstance(events, list) or not events or not isinstance(events[0], Mapping):
        return None
    event = dict(events[0])
    result = event.get("result")
    if isinstance(result, Mapping):
        result = dict(result)
        result["nativeResults"] = _entries(result.get("nativeResults"))
        event["result"] = result
    return event


def _entries(raw: object) -> dict[str, str]:
    """GraphQL's ``StringMapEntry`` list as a JSON object."""
    found: dict[str, str] = {}
    for entry in raw if isinstance(raw, list) else []:
        if isinstance(entry, Mapping) and isinstance(entry.get("key"), str):
            found[entry["key"]] = str(entry.get("value") or "")
    return found


def _object(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


_PRIORITIES = {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3}
"""GraphQL's ``IncidentPriority`` as ``incidentInfo.priority`` stores it."""


def _incident_info(raw: Mapping[str, Any]) -> ax.JsonObject:
    """A GraphQL ``Incident`` as the ``incidentInfo`` aspect JSON it was read from."""
    status = _object(raw.get("incidentStatus"))
    source = _object(raw.get("source"))
    origin = _object(source.get("source"))
    created = _object(raw.get("created"))
    return {
        "type": raw.get("incidentType"),
        "customType": raw.get("customType"),
        "title": raw.get("title"),
        "description": raw.get("description"),
        "priority": _PRIORITIES.get(str(raw.get("priority"))),
        "status": {"state": status.get("state"), "stage": status.get("stage")},
        "source": {"type": source.get("type"), "sourceUrn": origin.get("urn")},
        "startedAt": raw.get("startedAt"),
        "created": {"time": created.get("time")},
    }


def _assertion_states(
    urn: Urn, raw: list[_RawAssertion] | None
) -> tuple[AssertionState, ...] | None:
    """The assertions GMS listed on ``urn``, those naming it as their entity, by urn.

    GMS lists an assertion under every entity it names (a column's too); Lite joins it to
    its own entity only, and so does this, so both say the same.
    """
    if raw is None:
        return None
    states = (ax.assertion_from_aspects(a_urn, aspects, run) for a_urn, aspects, run in raw)
    found = {s.urn: s for s in states if s is not None and s.entity == urn}
    return tuple(found[u] for u in sorted(found))


def _incident_signals(
    raw: list[tuple[Urn, ax.JsonObject]] | None,
) -> tuple[IncidentSignal, ...] | None:
    if raw is None:
        return None
    signals = (ax.incident_from_info(i_urn, info) for i_urn, info in raw)
    found = {s.urn: s for s in signals if s is not None}
    return tuple(found[u] for u in sorted(found))


def _relationship_sources(
    relationships: object,
    types: Sequence[str],
    keep: Callable[[Urn, set[str]], bool] | None,
) -> list[Urn]:
    wanted = set(types)
    holders: list[Urn] = []
    for item in relationships if isinstance(relationships, list) else []:
        entity = item.get("entity") if isinstance(item, Mapping) else None
        if isinstance(entity, Mapping) and item.get("type") in wanted:
            urn = entity.get("urn")
            if isinstance(urn, str) and (keep is None or keep(urn, wanted)):
                holders.append(urn)
    return holders


def _is_dataset(urn: Urn) -> bool:
    """The training-data hop ends at datasets only (``mlModelTrainingData.trainingData``)."""
    return urn_type(urn) == "dataset"


def _next_scroll(page: Mapping[str, Any], previous: str | None) -> str | None:
    """The next scroll id; None at the end (or if the server repeats itself)."""
    scroll_id = page.get("nextScrollId")
    if not isinstance(scroll_id, str) or not scroll_id or scroll_id == previous:
        return None
    if not page.get("searchResults"):
        return None
    return scroll_id


def _node(urn: Urn, bundle: _Bundle, related: Mapping[Urn, ax.Aspects]) -> Node:
    try:
        return ax.node_from_aspects(
            urn,
            bundle.aspects,
            updates=bundle.updates,
            related=related,
            assertions=_assertion_states(urn, bundle.assertions),
            incidents=_incident_signals(bundle.incidents),
            profile=bundle.profile,
        )
    except ax.TranslationError as exc:
        raise CatalogError(f"DataHub's metadata for {urn} does not fit its model: {exc}") from exc


def _newest_row(envelope: Mapping[str, Any]) -> int | None:
    """The newest positive version of an aspect, from its v0 envelope's system metadata.

    GMS reports it as ``systemMetadata.version``; DataHub Lite (and a stand-in over it) as
    ``systemMetadata.properties.sysVersion``.
    """
    meta = envelope.get("systemMetadata")
    if not isinstance(meta, Mapping):
        return None
    properties = meta.get("properties")
    for raw in (meta.get("version"), (properties or {}).get("sysVersion")):
        try:
            number = int(raw) if raw is not None and not isinstance(raw, bool) else 0
        except (TypeError, ValueError):
            continue
        if number >= 1:
            return number
    return None


def _definition_aspect(definition: Definition) -> str:
    return "tagProperties" if isinstance(definition, TagDefinition) else "propertyDefinition"


def _definition_json(definition: Definition) -> ax.JsonObject:
    if isinstance(definition, TagDefinition):
        return ax.to_json(
            TagPropertiesClass(name=definition.name, description=definition.description)
        )
    return ax.to_json(
        StructuredPropertyDefinitionClass(
            qualifiedName=definition.urn.removeprefix(ax.STRUCTURED_PROPERTY_PREFIX),
            displayName=definition.display_name,
            valueType=f"urn:li:dataType:datahub.{definition.value_type}",
            cardinality=definition.cardinality,
            entityTypes=[f"urn:li:entityType:datahub.{t}" for t in definition.entity_types],
            description=definition.description,
        )
    )


__all__ = [
    "READ_ASPECTS",
    "DataHubCatalog",
    "Definition",
    "Identity",
    "PropertyDefinition",
    "ServerInfo",
    "TagDefinition",
]
