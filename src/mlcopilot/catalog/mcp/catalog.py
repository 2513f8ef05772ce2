"""DataHub through its official MCP server (``mcp-server-datahub`` over stdio) as the catalog.

The MCP tools are built for language models: trimmed, cleaned and re-sorted, and several of
their answers lose what the checks need. So each datum comes from the one call that answers it
exactly, and the tools are used where they answer in few calls, the SDK (against the same GMS,
as :mod:`mlcopilot.catalog.datahub.catalog` reads it) where they would not. The tools called
are :data:`TOOLS_CALLED` (what ``mlcopilot doctor`` checks the server offers):

- ``models()``: ``search`` (pages of 50, the tool's cap); soft-deleted models are dropped by
  their ``status``, read through the SDK.
- ``lineage()``: ``get_lineage`` finds what DataHub's lineage index has upstream of the model;
  the SDK fetches it in batches and the walk runs on the aspects, because the tool drops
  ``paths`` and names no relationship, and the index misses hops (training data, feature
  tables, primary keys), from each of which ``get_lineage`` is asked again.
- ``downstream()``, ``prefetch()``, ``nodes()``, ``upstream()``, ``schemas_at()``: the SDK.
  ``get_lineage`` takes one urn, so a scan of many models would cost a call per model, and
  downstream it drops relationship-only hops and training data; ``get_aspect_history`` takes
  at most 10 urns and probes each with a request of its own.
- ``schema_as_of()``: ``get_aspect_history`` picks the version in force at the time; the SDK
  reads that exact version (its cleaning drops empty records, among them every field's
  logical type).
- ``apply()``: tags through ``add_tags`` / ``remove_tags``, structured properties through
  ``add_structured_properties`` / ``remove_structured_properties``, documents through
  ``save_document``; incidents, definitions and the state compared against through the SDK.

Not ``get_entities`` / ``list_schema_fields``: their fields have no logical type and come in
"priority" order, tags and terms come as display names (a tag with no ``tagProperties``
vanishes: a PII tag could be lost), ML entities lack features, sources and training data, and
datasets lack ``status``, operations and column lineage. Not the quality-signal tools either:
``get_dataset_assertions`` is never offered on OSS DataHub, there is no incident tool, and the
batched ``entities`` read carries each dataset's assertions and incidents anyway.

Writes fold in order with exactly the Lite and DataHub backends' rule, so the same writes
report the same changes, and only the net difference per entity is sent. The tools refuse an
entity DataHub does not have, and removing a tag or property with no definition entity; those
writes go through the SDK as PATCHes of just the entries changed (see
:mod:`mlcopilot.catalog.proposals`). Documents keep mlcopilot's deterministic urns: the server
runs with ``save_document``'s update restriction off (it only ever receives urns mlcopilot
derives), and a document counts as changed when its title, text or related assets differ.

The server is spawned on first use with telemetry off, write tools on, the default search view
off (it would filter the model list) and a large response token budget; token-budget
truncation is still handled. Measured costs: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mlcopilot.catalog import aspect_writes
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.datahub.catalog import (
    BATCH_SIZE,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    DataHubCatalog,
)
from mlcopilot.catalog.datahub.client import GmsClient, refused_token
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.mcp.session import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
    McpSession,
)
from mlcopilot.catalog.payloads import as_int, envelope_values, result_urns, stamp, written_at
from mlcopilot.catalog.payloads import mapping as _object
from mlcopilot.catalog.urns import NO_LINEAGE, urn_type
from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.lineage.downstream import downstream_models_of
from mlcopilot.lineage.upstream import walk_upstream
from mlcopilot.model import (
    DatasetProfile,
    DocumentWrite,
    Edge,
    Lineage,
    Node,
    PropertyWrite,
    Schema,
    TagWrite,
    Urn,
    Write,
)
from mlcopilot.protocols import ClosedOnExit, WalkLimits
from mlcopilot.redact import register_secret

log = logging.getLogger(__name__)

SERVER = "mcp-server-datahub"
TOOLS_CALLED = frozenset(
    {
        "search",
        "get_lineage",
        "get_aspect_history",
        "add_tags",
        "remove_tags",
        "add_structured_properties",
        "remove_structured_properties",
        "save_document",
    }
)
"""Every ``mcp-server-datahub`` tool this backend calls: what ``mlcopilot doctor`` checks for.

Every call goes through :meth:`McpCatalog._call_all`, which refuses a tool not named here, so
a new call site cannot leave the doctor behind (``tests/catalog/test_mcp_tools.py`` records
the calls of the demo's scans and a removal, and finds exactly this set)."""
LINEAGE_RESULTS = 1000
"""``max_results`` of the first ``get_lineage`` call from a root; raised when DataHub has more."""
MAX_LINEAGE_RESULTS = 10_000
"""GMS's search result limit: ``get_lineage`` cannot return more from one root."""
SEARCH_PAGE = 50
"""The ``search`` tool's cap on ``num_results``."""
HISTORY_PAGE = 20
"""The ``get_aspect_history`` tool's cap on ``limit``."""
MAX_HISTORY_PAGES = 10
TOKEN_BUDGET = 2_000_000
"""``TOOL_RESPONSE_TOKEN_LIMIT`` for the server (its default, 80,000, trims a few hundred
lineage results); truncation beyond it is paged through."""
DOCUMENT_TYPE = "Analysis"
"""The ``save_document`` type of incident documents."""

_SDK_WRITTEN = frozenset({"incidentInfo", "tagProperties", "propertyDefinition"})
_REFUSED = re.compile(r"'status': (401|403)\b")
_MISSING_ENTITY = ("not found", "must be a valid DataHub URN", "bounded DataHub URN")


def find_server() -> list[str]:
    """The ``mcp-server-datahub`` command: next to this Python, else on ``PATH``.

    Raises:
        CatalogUnavailable: when it is in neither place.
    """
    beside = Path(sys.executable).with_name(SERVER)
    if beside.is_file():
        return [str(beside)]
    found = shutil.which(SERVER)
    if found is None:
        raise CatalogUnavailable(
            f"{SERVER} not found next to {sys.executable} or on PATH: "
            "install it with `pip install mcp-server-datahub` (a dependency of mlcopilot)"
        )
    return [found]


def server_environment(
    settings: DataHubSettings, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment ``mcp-server-datahub`` runs with for ``settings``.

    Only this reaches the server (on top of the MCP client's ``HOME``/``PATH`` defaults).
    """
    env = {
        "DATAHUB_GMS_URL": settings.server,
        "DATAHUB_TELEMETRY_ENABLED": "false",
        "TOOLS_IS_MUTATION_ENABLED": "true",
        "SAVE_DOCUMENT_RESTRICT_UPDATES": "false",
        "DATAHUB_MCP_DISABLE_DEFAULT_VIEW": "true",
        "DATAHUB_MCP_DOCUMENT_TOOLS_DISABLED": "true",
        "TOOL_RESPONSE_TOKEN_LIMIT": str(TOKEN_BUDGET),
    }
    if settings.token:
        env["DATAHUB_GMS_TOKEN"] = settings.token
    env.update(extra or {})
    return env


@dataclass(frozen=True, slots=True)
class McpOptions:
    """How :class:`McpCatalog` runs the server and its SDK side.

    ``command`` overrides the server command (default: :func:`find_server`); ``server_env``
    adds to its environment (tests set ``HOME``). ``timeout``, ``retries``, ``batch_size`` and
    ``max_workers`` are the SDK side's (see :class:`~mlcopilot.catalog.datahub.DataHubCatalog`).
    """

    command: tuple[str, ...] | None = None
    server_env: Mapping[str, str] = field(default_factory=dict)
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    concurrency: int = 4
    lineage_results: int = LINEAGE_RESULTS
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    batch_size: int = BATCH_SIZE
    max_workers: int = 4


@dataclass(frozen=True, slots=True)
class _Plan:
    """What :meth:`McpCatalog.apply` found to do.

    The folded intents, and the tag and property targets DataHub has no entity for (the
    tools refuse them).
    """

    folded: aspect_writes.Fold
    absent: frozenset[Urn]

    @property
    def before(self) -> aspect_writes.State:
        return self.folded.before

    @property
    def after(self) -> dict[tuple[Urn, str], ax.JsonObject]:
        return self.folded.pending


class McpCatalog(ClosedOnExit):
    """A :class:`~mlcopilot.protocols.Catalog` over ``mcp-server-datahub`` plus the SDK.

    Construction does no I/O. The first call checks GMS (``/config``: a clear error at once
    when it is down, instead of the server's 30 s of retries) and spawns the server.

    Args:
        settings: The GMS the server and the SDK talk to.
        options: Server command, timeouts and the SDK side's options.
        session: An already configured session to use instead of spawning one; it is not
            closed by :meth:`close` (tests share one server between catalogs).
    """

    def __init__(
        self,
        settings: DataHubSettings,
        options: McpOptions | None = None,
        *,
        session: McpSession | None = None,
    ) -> None:
        self._settings = settings
        self._options = options or McpOptions()
        self._session = session
        self._owns_session = session is None
        self._gms = GmsClient(
            settings, timeout=self._options.timeout, retries=self._options.retries
        )
        self._until: float | None = None
        """The bound of a scan's walk (:meth:`walk_until`); None: none."""
        self._sdk = self._new_sdk()
        self._prefetched: set[Urn] = set()
        """Roots whose upstream :meth:`prefetch` has read (their walk needs no discovery)."""
        self.skipped_writes: tuple[Write, ...] = ()
        """Writes the last :meth:`apply` could not make (documents on a server < 1.4)."""
        register_secret(settings.token)

    @property
    def label(self) -> str:
        """``mcp:<url>`` (never the token)."""
        return f"mcp:{self._settings.display_url}"

    @property
    def session(self) -> McpSession:
        """The MCP session (created, not yet started, on first access)."""
        if self._session is None:
            self._gms.server_config()  # GMS down: say so now, not after the server's retries
            command = list(self._options.command or find_server())
            self._session = McpSession(
                command,
                server_environment(self._settings, self._options.server_env),
                label=f"{SERVER} for {self._settings.display_url}",
                secrets=[self._settings.token or ""],
                startup_timeout=self._options.startup_timeout,
                call_timeout=self._options.call_timeout,
                concurrency=self._options.concurrency,
            )
        return self._session

    # --- Catalog -------------------------------------------------------------------------

    def models(self) -> list[Urn]:
        """Every ML model that exists and is not soft-deleted, sorted."""
        candidates = self._search("mlModel")
        nodes = self._sdk.nodes(candidates)
        return sorted(u for u in candidates if nodes[u].exists and not nodes[u].removed)

    def indexed_models(self) -> list[Urn]:
        """Every ML model the server's ``search`` tool lists, sorted; no aspect is read.

        See :class:`~mlcopilot.protocols.ModelIndex` (this search leaves soft-deleted out).
        """
        return sorted(self._search("mlModel"))

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """The current metadata of each urn (SDK batches; cached for this scan)."""
        return self._sdk.nodes(urns)

    def upstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop upstream of each urn, from aspects (see the module docstring)."""
        return self._sdk.upstream(urns)

    def downstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop downstream of each urn (SDK batches; see the module docstring)."""
        return self._sdk.downstream(urns)

    def downstream_models(self, urn: Urn, limits: WalkLimits | None = None) -> list[Urn]:
        """The models whose upstream lineage reaches ``urn`` (:mod:`mlcopilot.lineage.downstream`).

        The models are those :meth:`models` would list (exist, not soft-deleted); the walk
        itself is the SDK's, with readers and training data read afresh for each call.
        """
        self._sdk.start_reverse_walk()
        return downstream_models_of(self, urn, limits or WalkLimits())

    def lineage(self, root: Urn, limits: WalkLimits) -> Lineage:
        """The upstream lineage of ``root``: ``get_lineage`` finds it, aspects connect it."""
        if root not in self._prefetched:
            self._prefetch(root, limits)
        return walk_upstream(self, root, limits)

    def prefetch(self, roots: Sequence[Urn], limits: WalkLimits) -> None:
        """Fetch the upstream of many models at once, before their walks (a scan's estate).

        ``get_lineage`` takes one urn, so asking it from every model would cost a call per
        model. Instead the SDK reads the estate a level per round in shared batches, as the
        DataHub backend does, so an entity many models share is read once; ``get_lineage``
        only finishes long narrow chains, where the DataHub backend scrolls.
        """
        self._sdk.prefetch(roots, limits)
        self._prefetched.update(roots)

    def schemas_at(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], Schema | None]:
        """Training-time schemas of many datasets in batched SDK rounds (module docstring)."""
        return self._sdk.schemas_at(requests)

    def profiles_before(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], DatasetProfile | None]:
        """Profiles as of the models' training times: SDK batches (no MCP tool reads profiles).

        See :meth:`mlcopilot.catalog.datahub.catalog.DataHubCatalog.profiles_before`.
        """
        return self._sdk.profiles_before(requests)

    def oldest_profiles(self, urns: Sequence[Urn]) -> dict[Urn, DatasetProfile | None]:
        """Each dataset's oldest profile, through the SDK (Rest.li timeseries, oldest first)."""
        return self._sdk.oldest_profiles(urns)

    def schema_as_of(self, urn: Urn, when: datetime) -> Schema | None:
        """The schema of the newest version written before ``when``; None if history lacks it.

        A version is dated by its audit stamp. The current value's stamp is used only when it
        is newer than the version it replaced; otherwise it is stale (DataHub Lite keeps the
        first write's time on version 0) and ``lastObserved`` dates it.
        """
        as_of = ax.datetime_to_ms(when)
        entity_type = urn_type(urn)
        if as_of <= 0 or entity_type is None:
            return None
        if "get_aspect_history" not in self.session.tools():
            return self._sdk.schema_as_of(urn, when)  # DataHub < 1.4 hides the tool
        chosen = self._versions_before(urn, as_of)
        if chosen is None:
            return self._sdk.schema_as_of(urn, when)
        if "schemaMetadata" not in chosen:
            return None
        values = self._read_versions(urn, entity_type, chosen)
        if "schemaMetadata" not in values:  # pruned between the two reads
            return self._sdk.schema_as_of(urn, when)
        return ax.schema_from_aspects(values)

    def apply(self, writes: Sequence[Write], *, dry_run: bool = False) -> list[Write]:
        """Make DataHub hold ``writes``; return those that changed something (see the module)."""
        wanted, self.skipped_writes = aspect_writes.gate_documents(writes, self._gms, self.label)
        fitted = self._sdk.fit_incidents(wanted)  # what GMS accepts in incidentInfo.entities
        self.skipped_writes += fitted.skipped
        plan = self._plan(fitted.sent)
        if plan.folded.changed and not dry_run:
            try:
                self._execute(plan)
            finally:
                self._forget()
        return fitted.reported(plan.folded.changed)

    def incident_entity_types(self) -> frozenset[str]:
        """Entity types an incident may name (:class:`~mlcopilot.protocols.IncidentTargets`)."""
        return self._sdk.incident_entity_types()

    def close(self) -> None:
        """Stop the server (unless it was lent) and release the SDK's connections."""
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            session.close()
        self._sdk.close()
        self._gms.close()

    def walk_until(self, deadline: float | None) -> None:
        """Start no call past ``deadline`` and end every one by then (None: no bound).

        :class:`~mlcopilot.protocols.TimedWalk`: tool calls and the SDK side's calls alike.
        """
        self._until = deadline
        self._gms.until = deadline
        self._sdk.walk_until(deadline)

    def incident_status(self, urns: Sequence[Urn]) -> dict[Urn, tuple[str, str | None, int]]:
        """How our incidents were triaged in DataHub (there is no MCP tool for incidents)."""
        return self._sdk.incident_status(urns)

    # --- reading -------------------------------------------------------------------------

    def _call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        return self._call_all([(tool, arguments)])[0]

    def _call_all(self, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Any]:
        """Tool calls, concurrently; a refused token is reported as the DataHub backend does.

        Raises:
            ValueError: a tool not in :data:`TOOLS_CALLED` (a call site the doctor would miss).
        """
        unknown = sorted({tool for tool, _ in calls} - TOOLS_CALLED)
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: add the tool to TOOLS_CALLED")
        try:
            return self.session.call_all(
                calls, timeout=self._options.call_timeout, until=self._until
            )
        except CatalogError as exc:
            refused = _refused(exc, self._settings.display_url, calls[0][0])
            if refused is None:
                raise
            raise refused from exc

    def _search(self, entity_type: str) -> list[Urn]:
        """Urns of one entity type from the ``search`` tool, page by page."""
        found: list[Urn] = []
        while True:
            page = _object(
                self._call(
                    "search",
                    {
                        "query": "*",
                        "filter": f"entity_type = {entity_type}",
                        "num_results": SEARCH_PAGE,
                        "offset": len(found),
                    },
                ),
                SERVER,
                "search",
            )
            urns = result_urns(page.get("searchResults"))
            found += urns
            if not urns or len(found) >= as_int(page.get("total")):
                return list(dict.fromkeys(found))

    def _prefetch(self, root: Urn, limits: WalkLimits) -> None:
        """Fetch everything upstream of ``root`` in few batches before the walk.

        Round by round: ``get_lineage`` from the roots, one SDK batch for what it found; the
        next roots are the hops DataHub's index missed (edge targets not yet fetched). The
        walk itself fetches anything this misses, so the result never depends on it.
        """
        examined: set[Urn] = set()
        roots = [root] if urn_type(root) not in NO_LINEAGE else []
        pending = [root]
        for _ in range(max(1, limits.max_hops)):
            if not pending or len(examined) >= limits.max_nodes:
                break
            found = self._discover(roots, limits.max_hops, limits.max_nodes)
            reached = list(dict.fromkeys([*pending, *found]))
            self._sdk.nodes(reached)
            examined.update(reached)
            pending = list(
                dict.fromkeys(
                    e.upstream for e in self._sdk.upstream(reached) if e.upstream not in examined
                )
            )
            if pending:
                self._sdk.nodes(pending)
            roots = [u for u in pending if self._worth_discovering(u, examined)]

    def _worth_discovering(self, urn: Urn, examined: set[Urn]) -> bool:
        if urn_type(urn) in NO_LINEAGE:
            return False
        return any(e.upstream not in examined for e in self._sdk.upstream([urn]))

    def _discover(self, roots: Sequence[Urn], hops: int, cap: int) -> list[Urn]:
        """Everything DataHub's lineage index has upstream of ``roots`` (``get_lineage``)."""
        return list(
            dict.fromkeys(u for found in self._upstream_of(roots, hops, cap) for u in found)
        )

    def _upstream_of(self, roots: Sequence[Urn], hops: int, cap: int) -> list[list[Urn]]:
        """``get_lineage`` of each root, all pages; the first pages are asked concurrently."""
        hops = min(max(hops, 1), 3)
        cap = min(cap, MAX_LINEAGE_RESULTS)
        start = min(self._options.lineage_results, cap)
        firsts = self._lineage_pages(roots, hops, start)
        return [
            self._lineage_of(root, hops, cap, first, start)
            for root, first in zip(roots, firsts, strict=True)
        ]

    def _find_lineage(self, roots: Sequence[Urn], hops: int, cap: int) -> list[list[Urn]]:
        """The SDK's :data:`~mlcopilot.catalog.datahub.LineageFinder`: ``get_lineage``.

        It only saves requests, so a tool error loses nothing but speed (the SDK walks level
        by level instead), as a refused ``scrollAcrossLineage`` does; unreachable still fails.
        """
        try:
            return self._upstream_of(roots, hops, cap)
        except CatalogUnavailable:
            raise
        except CatalogError as exc:
            log.warning("%s: no get_lineage (%s); walking level by level", self.label, exc)
            return [[] for _ in roots]

    def _lineage_pages(self, roots: Sequence[Urn], hops: int, size: int) -> list[Any]:
        return self._call_all([("get_lineage", _lineage_args(r, hops, size, 0)) for r in roots])

    def _lineage_of(self, root: Urn, hops: int, cap: int, first: Any, size: int) -> list[Urn]:
        """All pages of one root's ``get_lineage``, from its first answer.

        ``offset`` is applied by the tool to the ``max_results`` it fetched, so: when GMS has
        more than ``max_results``, ask again with ``max_results`` raised (up to ``cap``) and
        ``offset`` past what was read; when the token budget cut a page short (``hasMore``
        with ``truncatedDueToTokenBudget``), ask again from ``offset + returned``.
        """
        urns: list[Urn] = []
        page = _upstreams(first)
        offset = 0
        for _ in range(cap + 1):  # every round reads at least one result or stops
            results = result_urns(page.get("searchResults"))
            urns += results
            total = as_int(page.get("total"))
            if page.get("truncatedDueToTokenBudget") and page.get("hasMore") and results:
                offset += len(results)
            elif total > size and size < cap:
                size, offset = min(total, cap), len(urns)
            else:
                if total > len(urns):
                    log.info("%s: DataHub's lineage of %s is partial", self.label, root)
                return urns
            page = _upstreams(self._call("get_lineage", _lineage_args(root, hops, size, offset)))
        return urns

    def _versions_before(self, urn: Urn, as_of: int) -> dict[str, int] | None:
        """For each schema aspect, the version in force at ``as_of`` (``get_aspect_history``).

        None when the history cannot tell (the tool's response budget dropped a pair).
        """
        first = self._history(urn, ax.SCHEMA_ASPECTS, None)
        chosen: dict[str, int] = {}
        for name in ax.SCHEMA_ASPECTS:
            pair, from_version, with_current = first.get(name), None, True
            for _ in range(MAX_HISTORY_PAGES):
                if pair is None:
                    pair = self._history(urn, (name,), from_version).get(name)
                    if pair is None:
                        return None
                error = pair.get("error")
                if isinstance(error, str) and error:
                    if any(text in error for text in _MISSING_ENTITY):
                        return {}
                    raise CatalogError(f"{self.label}: get_aspect_history {name}: {error}")
                version = _version_before(pair, as_of, with_current=with_current)
                if version is not None:
                    chosen[name] = version
                    break
                page = pair.get("page") or {}
                if not page.get("hasMore") or not isinstance(page.get("nextFromVersion"), int):
                    break
                pair, from_version, with_current = None, page["nextFromVersion"], False
        return chosen

    def _history(
        self, urn: Urn, names: Sequence[str], from_version: int | None
    ) -> dict[str, Mapping[str, Any]]:
        arguments: dict[str, Any] = {
            "urns": [urn],
            "aspect_names": list(names),
            "limit": HISTORY_PAGE,
            "include_current": from_version is None,
        }
        if from_version is not None:
            arguments["from_version"] = from_version
        answer = _object(self._call("get_aspect_history", arguments), SERVER, "get_aspect_history")
        return {
            str(pair.get("aspectName")): pair
            for pair in answer.get("results") or []
            if isinstance(pair, Mapping)
        }

    def _read_versions(
        self, urn: Urn, entity_type: str, versions: Mapping[str, int]
    ) -> dict[str, ax.JsonObject]:
        item: dict[str, Any] = {"urn": urn}
        for name, version in versions.items():
            item[name] = {"headers": {"If-Version-Match": str(version)}}
        values: dict[str, ax.JsonObject] = {}
        for entity in self._gms.batch_get(entity_type, [item]):
            if entity.get("urn") == urn:
                values.update(envelope_values(entity, versions))
        return values

    # --- writing -------------------------------------------------------------------------

    def _plan(self, writes: Sequence[Write]) -> _Plan:
        """Fold ``writes`` into the current state, as Lite and the DataHub backend do."""
        needs = aspect_writes.state_needs(writes)
        needs += [tag for w in writes for tag in _removed_definitions(w)]
        folded = aspect_writes.fold(writes, self._sdk.write_state(needs), own=_own_aspects)
        labelled = [ax.write_target(w) for w in writes if isinstance(w, TagWrite | PropertyWrite)]
        nodes = self._sdk.nodes(labelled)
        absent = frozenset(urn for urn, node in nodes.items() if not node.exists)
        aspect_writes.check_writable(folded.pending)  # a dry run refuses what the real one would
        return _Plan(folded=folded, absent=absent)

    def _execute(self, plan: _Plan) -> None:
        """Send ``plan``: SDK aspects first (definitions the tools check for), then the tools."""
        by_sdk = {key: value for key, value in plan.after.items() if key[1] in _SDK_WRITTEN}
        tag_calls = self._tag_calls(plan, by_sdk)
        property_calls = self._property_calls(plan, by_sdk)
        documents = plan.folded.documents().values()
        document_calls = [("save_document", _document_args(w)) for w in documents]
        calls = [*tag_calls, *property_calls, *document_calls]
        self._require_tools({tool for tool, _ in calls})
        read = {(urn, name): plan.before.get(urn, {}).get(name) for urn, name in by_sdk}
        aspect_writes.send(self._gms, self.label, by_sdk, read)
        # One at a time: GMS's tag and property mutations read, modify and write the aspect.
        for tool, arguments in calls:
            self._check_success(tool, self._call(tool, arguments))

    def _tag_calls(
        self, plan: _Plan, by_sdk: dict[tuple[Urn, str], ax.JsonObject]
    ) -> list[tuple[str, dict[str, Any]]]:
        adds: dict[Urn, list[Urn]] = {}
        removes: dict[Urn, list[Urn]] = {}
        for (urn, name), value in plan.after.items():
            if name != "globalTags":
                continue
            before = _tags(plan.before.get(urn, {}).get(name))
            after = _tags(value)
            gone = [t for t in before if t not in after]
            if urn in plan.absent or any(not _defined(plan, t, "tagProperties") for t in gone):
                by_sdk[(urn, name)] = value  # the tools refuse a missing entity or tag
                continue
            for tag in (t for t in after if t not in before):
                adds.setdefault(tag, []).append(urn)
            for tag in gone:
                removes.setdefault(tag, []).append(urn)
        return [
            *(("add_tags", {"tag_urns": [t], "entity_urns": us}) for t, us in adds.items()),
            *(("remove_tags", {"tag_urns": [t], "entity_urns": us}) for t, us in removes.items()),
        ]

    def _property_calls(
        self, plan: _Plan, by_sdk: dict[tuple[Urn, str], ax.JsonObject]
    ) -> list[tuple[str, dict[str, Any]]]:
        upserts: dict[str, tuple[dict[str, list[str | float]], list[Urn]]] = {}
        removals: dict[tuple[Urn, ...], list[Urn]] = {}
        for (urn, name), value in plan.after.items():
            if name != "structuredProperties":
                continue
            before = _properties(plan.before.get(urn, {}).get(name))
            after = _properties(value)
            gone = tuple(p for p in before if p not in after)
            if urn in plan.absent or any(not _defined(plan, p, "propertyDefinition") for p in gone):
                by_sdk[(urn, name)] = value  # the tools refuse a missing entity or definition
                continue
            changed = {p: list(v) for p, v in after.items() if before.get(p) != v}
            if changed:
                key = json.dumps(changed, sort_keys=True)
                upserts.setdefault(key, (changed, []))[1].append(urn)
            if gone:
                removals.setdefault(gone, []).append(urn)
        return [
            *(
                ("add_structured_properties", {"property_values": values, "entity_urns": urns})
                for values, urns in upserts.values()
            ),
            *(
                ("remove_structured_properties", {"property_urns": list(p), "entity_urns": us})
                for p, us in removals.items()
            ),
        ]

    def _require_tools(self, needed: set[str]) -> None:
        if not needed:
            return  # incidents and definitions only: no need to start the server
        missing = sorted(needed - self.session.tools())
        if missing:
            raise CatalogError(
                f"{self.session.label} does not offer {', '.join(missing)}: its write tools "
                f"need DataHub 1.4 or later (this is {self._gms.version() or 'unknown'}); "
                "use --catalog datahub:URL"
            )

    def _check_success(self, tool: str, answer: Any) -> None:
        """Tools that fail softly answer ``{"success": false, "message": ...}``."""
        if isinstance(answer, Mapping) and answer.get("success") is False:
            raise CatalogError(f"{self.session.label}: {tool} failed: {answer.get('message')}")

    def _forget(self) -> None:
        """Drop what this scan has read: DataHub no longer holds it after a write."""
        self._sdk.close()
        self._sdk = self._new_sdk()
        self._prefetched.clear()

    def _new_sdk(self) -> DataHubCatalog:
        o = self._options
        sdk = DataHubCatalog.from_settings(
            self._settings,
            batch_size=o.batch_size,
            max_workers=o.max_workers,
            timeout=o.timeout,
            retries=o.retries,
            find_lineage=self._find_lineage,
        )
        sdk.walk_until(self._until)
        return sdk


def open_mcp_catalog(settings: DataHubSettings, **options: Any) -> McpCatalog:
    """A :class:`McpCatalog` for ``settings`` (no I/O until the first call)."""
    return McpCatalog(settings, McpOptions(**options))


# --- helpers --------------------------------------------------------------------------------


def _refused(exc: CatalogError, url: str, tool: str) -> CatalogError | None:
    """The DataHub backend's message for a refused token, when a tool failed with 401/403."""
    found = _REFUSED.search(str(exc))
    if found is None or isinstance(exc, CatalogUnavailable):
        return None
    return refused_token(url, int(found.group(1)), tool)


def _lineage_args(root: Urn, hops: int, size: int, offset: int) -> dict[str, Any]:
    return {
        "urn": root,
        "upstream": True,
        "max_hops": hops,
        "max_results": size,
        "offset": offset,
    }


def _upstreams(answer: Any) -> Mapping[str, Any]:
    upstreams = _object(answer, SERVER, "get_lineage").get("upstreams")
    return upstreams if isinstance(upstreams, Mapping) else {}


def _version_before(pair: Mapping[str, Any], as_of: int, *, with_current: bool) -> int | None:
    """The newest version in one ``get_aspect_history`` result written before ``as_of``."""
    history = [h for h in pair.get("history") or [] if isinstance(h, Mapping)]
    entries: list[tuple[int, int | None]] = []
    current = pair.get("current")
    if with_current and isinstance(current, Mapping):
        newest_row = written_at(history[0]) if history else None
        entries.append((0, _written_current(current, newest_row)))
    entries += [(as_int(h.get("version")), written_at(h)) for h in history]
    for version, written in entries:
        if written is not None and written < as_of:
            return version
    return None


def _written_current(current: Mapping[str, Any], replaced: int | None) -> int | None:
    """When the current value was written: its stamp only if newer than the one it replaced.

    DataHub Lite keeps the first write's time on version 0, so an older stamp is stale and
    ``lastObserved`` dates it instead.
    """
    stamped = stamp(current.get("auditStamp"), "time")
    if stamped is not None and (replaced is None or stamped > replaced):
        return stamped
    return stamp(current.get("systemMetadata"), "lastObserved") or stamped


def _own_aspects(write: Write, current: ax.Aspects) -> dict[str, ax.JsonObject]:
    """Lite's rule, except documents: ``save_document`` stamps its own times and folder."""
    if isinstance(write, DocumentWrite):
        return _document_update(write, current.get("documentInfo"))
    return ax.aspects_for_write(write, current)


def _document_update(write: DocumentWrite, current: ax.JsonObject | None) -> dict[str, Any]:
    """``documentInfo`` to save, or nothing when title, text and related assets are there.

    ``save_document`` stamps its own times and folder, so those cannot be compared.
    """
    if current is not None and _document_content(current) == (
        write.title,
        write.text,
        tuple(write.related_assets),
    ):
        return {}
    return ax.aspects_for_write(write, {})


def _document_content(info: Mapping[str, Any]) -> tuple[str, str, tuple[Urn, ...]]:
    contents = info.get("contents")
    text = contents.get("text") if isinstance(contents, Mapping) else None
    assets = tuple(
        str(item["asset"])
        for item in info.get("relatedAssets") or []
        if isinstance(item, Mapping) and item.get("asset")
    )
    return str(info.get("title") or ""), str(text or ""), assets


def _document_args(write: DocumentWrite) -> dict[str, Any]:
    return {
        "document_type": DOCUMENT_TYPE,
        "title": write.title,
        "content": write.text,
        "urn": write.urn,
        "related_assets": list(write.related_assets),
    }


def _removed_definitions(write: Write) -> list[Urn]:
    """Tags and properties a write may remove: whether they have an entity decides the tool."""
    if isinstance(write, TagWrite) and not write.present:
        return [write.tag]
    if isinstance(write, PropertyWrite):
        return [write.property]
    return []


def _defined(plan: _Plan, urn: Urn, aspect: str) -> bool:
    return aspect in plan.before.get(urn, {}) or (urn, aspect) in plan.after


def _tags(aspect: ax.JsonObject | None) -> list[Urn]:
    return [
        str(item["tag"])
        for item in (aspect or {}).get("tags") or []
        if isinstance(item, Mapping) and item.get("tag")
    ]


def _properties(aspect: ax.JsonObject | None) -> dict[Urn, tuple[str | float, ...]]:
    return {
        name if name.startswith("urn:li:") else ax.STRUCTURED_PROPERTY_PREFIX + name: values
        for name, values in ax.structured_properties(aspect).items()
    }


__all__ = [
    "TOOLS_CALLED",
    "McpCatalog",
    "McpOptions",
    "find_server",
    "open_mcp_catalog",
    "server_environment",
]
