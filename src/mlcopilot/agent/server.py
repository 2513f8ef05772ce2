"""The MCP server: FastMCP tools and the incident resource, thin over the library.

Each tool is an async function that runs its work in a worker thread
(:func:`anyio.to_thread.run_sync`): FastMCP 1.x calls a *sync* tool on the event loop itself,
so one long scan would stall every other request, and over streamable HTTP every other
client. The work opens the catalog and the state store, uses them and closes them, all in
that one thread, on every call: the SQLite connections of DataHub Lite and of the store are
not shared between threads, a remote catalog holds no session between calls, and a store
another process scanned into meanwhile is read as it is now, never from a stale handle.

Without ``allow_writes`` nothing a tool does writes anywhere: ``scan_model`` is a dry run
(the store opened read-only, the catalog only read, no sink called) and
``acknowledge_incident`` is not registered at all.
"""

# No `from __future__ import annotations`: FastMCP evaluates each tool's signature, and
# scan_model's `write` description is chosen when the server is built (a local name).
import difflib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.types import ToolAnnotations
from pydantic import AnyUrl, Field, ValidationError

from mlcopilot import redact
from mlcopilot.agent.results import (
    Acknowledged,
    Explanation,
    FindingOut,
    GapOut,
    ImpactAnswer,
    IncidentList,
    IncidentOut,
    LinksOut,
    ModelImpactOut,
    ReasonOut,
    ScanAnswer,
    UnknownOut,
    VerdictOut,
)
from mlcopilot.checks import available_infos, infos_of
from mlcopilot.errors import MlCopilotError, UsageError
from mlcopilot.incidents.gate import GateRules, evaluate_gate
from mlcopilot.incidents.ids import MIN_PREFIX, look_up
from mlcopilot.incidents.payload import OutboxItem, SinkRef
from mlcopilot.incidents.writeback import document_urn, incident_document, incident_urn, info_for
from mlcopilot.model import (
    CheckInfo,
    Deprecation,
    Finding,
    Incident,
    IncidentState,
    OutboxStatus,
    Severity,
    sink_of,
)
from mlcopilot.notify.content import entity_url
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.protocols import StateStore
from mlcopilot.scan import ScanOptions, ScanResult
from mlcopilot.scan.delivery import hand_change_request
from mlcopilot.scan.whatif import ImpactReport, parse_changes
from mlcopilot.scan.wiring import open_catalog, open_state
from mlcopilot.service import Service
from mlcopilot.settings import Settings
from mlcopilot.text.names import short_name

log = logging.getLogger(__name__)

T = TypeVar("T")

SERVER_NAME = "mlcopilot"
INCIDENT_RESOURCE = "mlcopilot://incident/{incident_id}"

OUTBOX_LOOKBACK = 5_000
"""Delivered outbox rows read, newest first, to find an incident's GitHub issue and Slack
thread: the outbox is not indexed by incident, and an incident's first notification is
normally among its recent rows."""

SeverityName = Literal["critical", "high", "medium", "low"]
StateName = Literal["open", "acknowledged", "resolved", "active", "all"]

INSTRUCTIONS = (
    "mlcopilot watches what feeds ML models in DataHub: it walks each model's upstream "
    "lineage and checks every node for schema drift, PII exposure, stale and deprecated "
    "sources, and tracks each risk as an incident. Ask scan_model whether a model is safe to "
    "retrain or deploy (its verdict and findings); list_incidents for what is open; "
    "explain_incident for what changed, the lineage path, the evidence and what to do; "
    "impact_of_change for what a planned change to a dataset would break. "
    "Incident documents are resources: mlcopilot://incident/{incident_id}."
)


class Tools:
    """The tools' work, synchronous: each call opens what it needs and closes it again.

    Args:
        settings: The same settings as the command line's (catalog, state store, checks,
            notification sinks, ``datahub.ui_url`` for links).
        allow_writes: Whether a tool may write (a recording scan, an acknowledgement).
        clock: The time of scans and acknowledgements (default: the real time).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        allow_writes: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.allow_writes = allow_writes
        self._clock = clock or (lambda: datetime.now(UTC))

    # --- scan_model

    def scan_model(self, model: str, *, write: bool = False, fail_on: str = "high") -> ScanAnswer:
        """Scan one model (its urn or its unique name); a dry run unless ``write``."""
        if write and not self.allow_writes:
            raise UsageError(
                "write=True needs the server started with `mlcopilot mcp --allow-writes`; "
                "this one only reads"
            )
        if not model.strip():
            raise UsageError("model is empty; give a model's urn or its name")
        service = Service.from_settings(self.settings)
        options = ScanOptions(now=self._clock(), models=(model.strip(),), dry_run=not write)
        with service.opened(create=write, dry_run=not write) as (catalog, store):
            try:
                # Writes commit the incidents with their write-back and notifications as outbox
                # rows and return: the relay's first delivery waits group_wait (30 s by
                # default) for related findings, longer than a tool call should block.
                result = service.scan(catalog, store, options, deliver=False)
            except UsageError as exc:
                # The library names the command's flag ("--model NAME: ..."); here it is the
                # tool's argument, so the sentence starts with the model.
                raise UsageError(str(exc).removeprefix("--model ")) from None
        return _scan_answer(result, infos_of(service.checks), Severity(fail_on))

    # --- impact_of_change

    def impact_of_change(
        self,
        dataset: str,
        *,
        drop: Sequence[str] = (),
        rename: Mapping[str, str] | None = None,
        retype: Mapping[str, str] | None = None,
        deprecate: bool = False,
    ) -> ImpactAnswer:
        """The impact preview of a change to ``dataset`` (its urn or name): writes nothing."""
        rename = rename or {}
        retype = retype or {}
        if not (drop or rename or retype or deprecate):
            raise UsageError("no change to preview: give drop, rename, retype or deprecate=true")
        try:
            changes = parse_changes(
                drop=drop,
                rename=[f"{old}={new}" for old, new in rename.items()],
                retype=[f"{column}={kind}" for column, kind in retype.items()],
                deprecation=Deprecation() if deprecate else None,
            )
        except UsageError as exc:
            # Worded for the command's flags (--drop, --rename OLD=NEW); here they are arguments.
            raise UsageError(str(exc).removeprefix("--")) from None
        service = Service.from_settings(self.settings)
        with service.opened(dry_run=True) as (catalog, store):
            report = service.preview_change(catalog, store, dataset.strip(), changes, self._clock())
        return _impact_answer(report, infos_of(service.checks))

    # --- incidents

    def list_incidents(
        self, state: str = "open", model: str | None = None, limit: int = 100
    ) -> IncidentList:
        """The incidents in ``state`` (of ``model``: its urn or name), newest first."""
        store = open_state(self.settings)
        try:
            incidents = store.incidents(include_resolved=state in ("resolved", "all"))
            wanted = model.strip() if model is not None else None
            if wanted is not None:
                # Every model that ever had an incident, then the catalog's: an unknown name
                # is an error with the closest names, as `mlcopilot scan --model` says it.
                known = {i.model for i in store.incidents(include_resolved=True)}
                if not _names_model(wanted, known):
                    self._check_model(wanted, known)
        finally:
            store.close()
        chosen = [
            i
            for i in incidents
            if _state_matches(i, state) and (wanted is None or _names_model(wanted, [i.model]))
        ]
        return IncidentList(incidents=[_incident_out(i) for i in chosen[:limit]], total=len(chosen))

    def _check_model(self, wanted: str, known: set[str]) -> None:
        """Nothing when the catalog holds the model ``wanted`` names; else UsageError."""
        if not wanted:
            raise UsageError("model is empty; give a model's urn or its name, or leave it out")
        catalog = open_catalog(self.settings.catalog_spec, self.settings)
        try:
            models = set(catalog.models())
            label = catalog.label
        finally:
            catalog.close()
        if _names_model(wanted, models):
            return
        names = sorted({short_name(u) for u in models | known})
        close = difflib.get_close_matches(short_name(wanted), names, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(
            f"{wanted}: no model of that name in {label} nor among the incidents{hint}"
        )

    def explain_incident(self, incident_id: str) -> Explanation:
        """What the incident record and the outbox hold about one incident."""
        notify = NotifySettings.from_settings(self.settings)
        store = open_state(self.settings)
        try:
            incident = _incident(store, incident_id)
            github, slack, written = _sink_links(store, incident)
        finally:
            store.close()
        info = info_for(incident.check, available_infos())
        base = notify.datahub_url
        links = LinksOut(
            resource=INCIDENT_RESOURCE.format(incident_id=incident.id),
            datahub_entity=entity_url(base, incident.entity),
            datahub_model=entity_url(base, incident.model),
            datahub_incident=incident_urn(incident),
            datahub_document=document_urn(incident),
            written_back=written,
            github_issue=github,
            slack_thread=slack,
        )
        return Explanation(
            incident_id=incident.id,
            generation=incident.generation,
            state=incident.state.value,
            check=incident.check,
            title=info.title,
            severity=incident.severity.value,
            model=incident.model,
            entity=incident.entity,
            field=incident.field,
            change=incident.change,
            previous_field=incident.previous_field,
            what_changed=incident.message,
            path=list(incident.path),
            evidence=dict(incident.evidence),
            why=info.why,
            suggested_action=info.action,
            opened_at=_iso(incident.opened_at),
            updated_at=_iso(incident.updated_at),
            acknowledged_by=incident.acknowledged_by,
            acknowledged_at=_iso_or_none(incident.acknowledged_at),
            resolved_at=_iso_or_none(incident.resolved_at),
            resolution=incident.resolution,
            links=links,
        )

    def incident_document(self, incident_id: str) -> str:
        """The markdown document the DataHub write-back holds for the incident."""
        store = open_state(self.settings)
        try:
            incident = _incident(store, incident_id)
        finally:
            store.close()
        return incident_document(incident, info_for(incident.check, available_infos()))

    def acknowledge_incident(self, incident_id: str, by: str) -> Acknowledged:
        """Acknowledge an incident as ``by``, as `mlcopilot incidents ack` does."""
        if not self.allow_writes:  # never registered then; a direct caller is refused too
            raise UsageError("acknowledging needs the server started with --allow-writes")
        if not by.strip():
            raise UsageError("by is empty; say who acknowledges the incident")
        notify = NotifySettings.from_settings(self.settings)
        store = open_state(self.settings)
        try:
            current = _incident(store, incident_id)
            if current.state is IncidentState.ACKNOWLEDGED:
                return _acknowledged(current, already=True)
            now = self._clock()
            request = hand_change_request(notify, store, current.model, resolving=None, at=now)
            # As the command: the write-back of an acknowledgement is DataHub's own state,
            # read back from there on the next scan, so no catalog row is planned for it.
            request = replace(request, writeback=())
            done = store.acknowledge(current.id, by=by.strip(), at=now, notify=request)
        finally:
            store.close()
        return _acknowledged(done, already=False)


def _scan_answer(result: ScanResult, infos: dict[str, CheckInfo], fail_on: Severity) -> ScanAnswer:
    (report,) = result.models
    states: dict[str, str] = {i.id: "new" for i in result.changes.opened}
    states.update((i.id, i.state.value) for i in result.changes.updated)
    verdict = evaluate_gate(GateRules(fail_on=fail_on), result.models, result.changes)
    findings = [
        _finding_out(f, info_for(f.check, infos), states.get(f.id, "new")) for f in report.findings
    ]
    return ScanAnswer(
        model=report.urn,
        catalog=result.catalog,
        scanned_at=_iso(result.now),
        dry_run=result.dry_run,
        verdict=VerdictOut(
            safe=verdict.passed,
            fail_on=fail_on.value,
            reasons=[
                ReasonOut(rule=r.rule, message=r.message, incidents=list(r.incidents))
                for r in verdict.reasons
            ],
        ),
        findings=findings,
        coverage_gaps=[GapOut(entity=g.entity, reason=g.reason) for g in report.gaps],
        unknowns=[UnknownOut(entity=u, reasons=list(r)) for u, r in report.unknown.items()],
        upstream_entities=len(report.lineage.nodes) - 1,
        truncated=report.lineage.truncated,
        errors=list(report.errors),
        notes=list(result.notes),
        outbox_rows=len(result.notifications),
    )


def _finding_out(finding: Finding, info: CheckInfo, state: str) -> FindingOut:
    return FindingOut(
        check=finding.check,
        title=info.title,
        severity=finding.severity.value,
        entity=finding.entity,
        field=finding.field,
        change=finding.change,
        previous_field=finding.previous_field,
        message=finding.message,
        why=info.why,
        action=info.action,
        path=list(finding.path),
        evidence=dict(finding.evidence),
        incident_id=finding.id,
        incident_state=state,
    )


def _impact_answer(report: ImpactReport, infos: dict[str, CheckInfo]) -> ImpactAnswer:
    models = [
        ModelImpactOut(
            model=impact.urn,
            affected=impact.affected,
            severity=impact.severity.value if impact.severity is not None else None,
            features=list(impact.features),
            fields=list(impact.fields),
            findings=[_finding_out(f, info_for(f.check, infos), "new") for f in impact.findings],
        )
        for impact in report.models
    ]
    return ImpactAnswer(
        dataset=report.dataset,
        catalog=report.catalog,
        changes=report.changes.describe(),
        worst=report.worst.value if report.worst is not None else None,
        affected_models=[m.urn for m in report.affected],
        models=models,
        notes=list(report.notes),
    )


def _names_model(wanted: str, models: Iterable[str]) -> bool:
    """Whether ``wanted`` is one of ``models``' urns or names (a name in any case)."""
    lowered = wanted.lower()
    return any(wanted == u or short_name(u).lower() == lowered for u in models)


def _state_matches(incident: Incident, wanted: str) -> bool:
    if wanted == "all":
        return True
    if wanted == "active":
        return incident.is_open
    return incident.state.value == wanted


def _incident(store: StateStore, incident_id: str) -> Incident:
    """The incident ``incident_id`` names: its id, or a unique start of it, as the CLI takes."""
    lookup = look_up(store, incident_id)
    if lookup.found is not None:
        return lookup.found
    if lookup.too_short:
        raise UsageError(
            f"no incident {incident_id!r}; give its id or at least {MIN_PREFIX} of its first "
            "characters (list_incidents gives the ids)"
        )
    if not lookup.matches:
        raise UsageError(
            f"no incident {incident_id!r} in the state database; list_incidents gives the ids"
        )
    ids = ", ".join(i.id for i in lookup.matches[:5])
    more = f" and {len(lookup.matches) - 5} more" if len(lookup.matches) > 5 else ""
    raise UsageError(
        f"{incident_id!r} starts {len(lookup.matches)} incident ids ({ids}{more}); give more "
        "of the one you mean"
    )


def _incident_out(incident: Incident) -> IncidentOut:
    return IncidentOut(
        incident_id=incident.id,
        state=incident.state.value,
        check=incident.check,
        severity=incident.severity.value,
        model=incident.model,
        entity=incident.entity,
        field=incident.field,
        message=incident.message,
        opened_at=_iso(incident.opened_at),
        updated_at=_iso(incident.updated_at),
        acknowledged_by=incident.acknowledged_by,
        resolved_at=_iso_or_none(incident.resolved_at),
    )


def _acknowledged(incident: Incident, *, already: bool) -> Acknowledged:
    return Acknowledged(
        incident_id=incident.id,
        state=incident.state.value,
        acknowledged_by=incident.acknowledged_by,
        acknowledged_at=_iso_or_none(incident.acknowledged_at),
        already=already,
    )


def _sink_links(store: StateStore, incident: Incident) -> tuple[str | None, str | None, bool]:
    """The GitHub issue URL, the Slack thread and whether the write-back reached the catalog.

    Read from the delivered outbox rows: a notification row names its group's members, and
    the store remembers where each group lives in each sink.
    """
    github: str | None = None
    slack: str | None = None
    written = False
    document = document_urn(incident)
    # (group, generation, target): the targets routing chose (``slack:C0PAY``...) included.
    delivered: set[tuple[str, int, str]] = set()
    for item in store.outbox(statuses=[OutboxStatus.DONE], limit=OUTBOX_LOOKBACK):
        if item.sink == "datahub":
            written = written or any(w.get("urn") == document for w in _writes(item))
        elif _has_member(item, incident):
            delivered.add((item.group_key, item.group_generation, item.sink))
    for key, generation, target in sorted(delivered):
        if sink_of(target) == "github":
            github = github or _ref_text(store.sink_ref(key, generation, target))
        elif sink_of(target) == "slack":
            slack = slack or _ref_text(store.sink_ref(key, generation, target))
    return github, slack, written


def _writes(item: OutboxItem) -> Iterable[dict[str, Any]]:
    writes = item.payload.get("writes")
    return [w for w in writes if isinstance(w, dict)] if isinstance(writes, list) else []


def _has_member(item: OutboxItem, incident: Incident) -> bool:
    group = item.payload.get("group")
    members = group.get("members") if isinstance(group, dict) else None
    if not isinstance(members, list):
        return False
    return any(
        isinstance(m, dict)
        and m.get("incident_id") == incident.id
        and m.get("generation") == incident.generation
        for m in members
    )


def _ref_text(ref: SinkRef | None) -> str | None:
    """A GitHub issue's URL; a Slack thread's permalink when known, else ``channel/ts``."""
    if ref is None:
        return None
    return ref.url or ref.key or None


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _iso_or_none(when: datetime | None) -> str | None:
    return _iso(when) if when is not None else None


# --- the FastMCP app


class _Server(FastMCP):
    """FastMCP, with errors of one sentence and mlcopilot's own version.

    FastMCP words a tool argument its validation refuses as pydantic's text, with an
    ``errors.pydantic.dev`` link and line breaks; prefixes a tool's own error with
    "Error executing tool NAME:"; and says a resource template's error twice
    ("Error creating resource from template: Error creating resource from template: ...");
    the low-level server announces the MCP SDK's version as the server's.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        import mlcopilot

        self._mcp_server.version = mlcopilot.__version__

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a tool; arguments it refuses are one sentence naming each."""
        try:
            return await super().call_tool(name, arguments)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_invalid_arguments(exc.__cause__)) from None
            if isinstance(exc.__cause__, ToolError):  # ours (_run), less "Error executing tool"
                raise ToolError(str(exc.__cause__)) from None
            raise

    async def read_resource(self, uri: AnyUrl | str) -> Iterable[ReadResourceContents]:
        """Read a resource; our error is said once, as the tools say it."""
        try:
            return await super().read_resource(uri)
        except ValueError as exc:
            ours = _tool_error_in(exc)
            if ours is None:
                raise
            raise ResourceError(str(ours)) from None


def _invalid_arguments(error: ValidationError) -> str:
    """Each refused argument, ``name: what is wrong (got value)``, on one line."""
    problems = []
    for problem in error.errors(include_url=False):
        name = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            problems.append(f"{name} is required")
            continue
        what = str(problem["msg"]).removeprefix("Value error, ")
        got = problem.get("input")
        shown = f" (got {got!r})" if isinstance(got, str | int | float | bool) else ""
        problems.append(f"{name}: {what}{shown}")
    return redact.redact(" ".join("; ".join(problems).split()))


def _tool_error_in(exc: BaseException) -> ToolError | None:
    """The ToolError an exception (FastMCP's wrapping of ours) carries, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ToolError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


async def _run(work: Callable[[], T]) -> T:
    """``work`` in a worker thread; an expected error as one sentence, a bug without traceback.

    The message is redacted like everything the command prints: an error may quote a URL.
    """
    try:
        return await anyio.to_thread.run_sync(work)
    except MlCopilotError as exc:
        raise ToolError(redact.redact(str(exc))) from None
    except Exception as exc:  # a bug: the client gets one line, the server's log the traceback
        log.exception("internal error in a tool")
        raise ToolError(
            f"internal error ({type(exc).__name__}); the mlcopilot server's log has the details"
        ) from None


ModelParam = Annotated[
    str,
    Field(
        description="The model: its urn (urn:li:mlModel:(urn:li:dataPlatform:P,NAME,ENV)) or "
        "its name when only one model has it, e.g. churn_predictor_v1."
    ),
]
FailOnParam = Annotated[
    SeverityName,
    Field(
        description="The verdict is not safe for a finding at or above this severity "
        "(or for a model not fully checked)."
    ),
]
IncidentIdParam = Annotated[
    str, Field(description="The incident's id (16 hex digits), as list_incidents gives it.")
]

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True)

SCAN_DESCRIPTION = (
    "Is this model safe to retrain or deploy? Walks the model's upstream lineage in the "
    "catalog (features, feature tables, datasets, training data) and runs every check on each "
    "node: schema drift since training, PII exposure, stale and deprecated sources. Returns "
    "the verdict, each finding (check, entity, field, severity, why it matters, what to do, "
    "its lineage path and incident id), coverage gaps (where lineage stops before a dataset) "
    "and entities that lacked metadata."
)


def build_server(
    settings: Settings,
    *,
    allow_writes: bool = False,
    clock: Callable[[], datetime] | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> FastMCP:
    """The FastMCP app over ``settings``; writing tools only with ``allow_writes``.

    ``host`` and ``port`` matter for streamable HTTP only (FastMCP turns DNS-rebinding
    protection on for a loopback host).
    """
    tools = Tools(settings, allow_writes=allow_writes, clock=clock)
    # WARNING: FastMCP's own INFO lines (one per request) would drown the command's stderr.
    server = _Server(
        SERVER_NAME, instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING"
    )

    write_help = (
        "Record the scan: open, update and resolve incidents and commit their write-back and "
        "notifications to the outbox. False (the default): a dry run that writes nothing."
        if allow_writes
        else "Refused here: this server was started read-only (without --allow-writes), so "
        "every scan is a dry run that writes nothing."
    )

    async def scan_model(
        model: ModelParam,
        fail_on: FailOnParam = "high",
        write: Annotated[bool, Field(description=write_help)] = False,
    ) -> ScanAnswer:
        return await _run(partial(tools.scan_model, model, write=write, fail_on=fail_on))

    server.add_tool(
        scan_model,
        title="Scan a model's upstream",
        description=SCAN_DESCRIPTION
        + (" With write=true the scan is recorded." if allow_writes else " A dry run."),
        annotations=ToolAnnotations(
            readOnlyHint=not allow_writes, destructiveHint=False, idempotentHint=True
        ),
    )

    @server.tool(
        title="List incidents",
        description="The incidents mlcopilot tracks, newest first: each risk found upstream "
        "of a model, with its state (open, acknowledged, resolved).",
        annotations=READ_ONLY,
    )
    async def list_incidents(
        state: Annotated[
            StateName,
            Field(description="open, acknowledged, resolved; active = open or acknowledged; all."),
        ] = "open",
        model: Annotated[
            str | None, Field(description="Only this model's incidents: its urn or its name.")
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=1000, description="At most this many incidents, newest first.")
        ] = 100,
    ) -> IncidentList:
        return await _run(partial(tools.list_incidents, state, model, limit))

    @server.tool(
        title="Explain an incident",
        description="Everything known about one incident: what changed, where (entity, "
        "field), the lineage path from the model to it, the evidence, why it matters, the "
        "suggested action, and links (DataHub pages, its DataHub incident and document, its "
        "GitHub issue and Slack thread once notified).",
        annotations=READ_ONLY,
    )
    async def explain_incident(incident_id: IncidentIdParam) -> Explanation:
        return await _run(partial(tools.explain_incident, incident_id))

    @server.tool(
        title="Preview a change's impact",
        description="What would a change to a dataset break, before it lands? Previews "
        "dropping, renaming or retyping columns, or deprecating the dataset: finds the ML "
        "models downstream and scans them against the catalog as it would be after the "
        "change. Returns each model's new findings (the incidents a scan after the change "
        "would open), the features the change reaches it through, and the worst severity. "
        "Nothing is written.",
        annotations=READ_ONLY,
    )
    async def impact_of_change(
        dataset: Annotated[
            str,
            Field(
                description="The dataset: its urn, or its name when only one dataset a "
                "model reads has it, e.g. raw.customers."
            ),
        ],
        drop: Annotated[list[str], Field(description="Columns that would be dropped.")] = [],  # noqa: B006
        rename: Annotated[
            dict[str, str], Field(description="Columns that would be renamed: old name to new.")
        ] = {},  # noqa: B006
        retype: Annotated[
            dict[str, str],
            Field(description="Columns whose type would change: column to its new type."),
        ] = {},  # noqa: B006
        deprecate: Annotated[
            bool, Field(description="The dataset would be deprecated in DataHub.")
        ] = False,
    ) -> ImpactAnswer:
        # The defaults are never mutated: FastMCP builds fresh values from each call's JSON.
        work = partial(
            tools.impact_of_change,
            dataset,
            drop=drop,
            rename=rename,
            retype=retype,
            deprecate=deprecate,
        )
        return await _run(work)

    if allow_writes:

        @server.tool(
            title="Acknowledge an incident",
            description="Mark an open incident acknowledged: someone is on it. Its "
            "notifications stop updating and reminding (only the resolution is sent); the "
            "next scan keeps the state.",
            annotations=ToolAnnotations(
                readOnlyHint=False, destructiveHint=False, idempotentHint=True
            ),
        )
        async def acknowledge_incident(
            incident_id: IncidentIdParam,
            by: Annotated[str, Field(description="Who acknowledges: a person's name or handle.")],
        ) -> Acknowledged:
            return await _run(partial(tools.acknowledge_incident, incident_id, by))

    @server.resource(
        INCIDENT_RESOURCE,
        name="incident",
        title="Incident document",
        description="The incident's document, as the DataHub write-back holds it: what "
        "changed, where, the lineage path, evidence, the suggested action.",
        mime_type="text/markdown",
    )
    async def incident_resource(incident_id: str) -> str:
        return await _run(partial(tools.incident_document, incident_id))

    return server
