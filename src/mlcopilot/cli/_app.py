"""The ``mlcopilot`` command line: a thin client of the library.

Exit codes: 0 the command ran (no finding at or above ``--fail-on``), 1 a finding at or above
``--fail-on``, 2 bad usage or input, 3 the catalog cannot be reached, 4 an internal error,
5 the scan was saved but some notifications or write-backs are not delivered yet (they stay
in the outbox and are retried: ``mlcopilot outbox list``).
"""

from __future__ import annotations

import functools
import getpass
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mlcopilot import redact
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks import describe_checks
from mlcopilot.cli.render.report import (
    render_incidents_json,
    render_json,
    render_markdown,
    render_outbox_json,
)
from mlcopilot.cli.render.terminal import (
    print_incidents,
    print_outbox,
    print_relay,
    print_scan,
    print_writes,
)
from mlcopilot.clock import OffsetClock
from mlcopilot.errors import MlCopilotError, UsageError
from mlcopilot.model import Incident, IncidentState, Severity
from mlcopilot.names import short_name
from mlcopilot.notify.codec import OutboxStatus
from mlcopilot.notify.delivery import hand_change_request, scan_delivery
from mlcopilot.notify.delivery import relay as build_relay
from mlcopilot.notify.relay import RelayReport
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.protocols import Catalog, StateStore, WalkLimits
from mlcopilot.scan import Progress as ScanProgress
from mlcopilot.scan import ScanOptions, ScanResult, accept_baselines, scan
from mlcopilot.settings import Settings, load_settings
from mlcopilot.wiring import configured_checks, open_catalog, open_lite, open_state
from mlcopilot.wording import count

app = typer.Typer(
    name="mlcopilot",
    help="Watch what feeds your ML models in DataHub: schema drift, PII, stale and deprecated "
    "sources.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(help="Manage the embedded DataHub Lite catalog.", no_args_is_help=True)
incidents_app = typer.Typer(help="List, acknowledge and resolve incidents.", no_args_is_help=True)
baseline_app = typer.Typer(help="Manage the schemas models were trained on.", no_args_is_help=True)
outbox_app = typer.Typer(
    help="See and retry what mlcopilot sends to DataHub, GitHub and Slack.", no_args_is_help=True
)
app.add_typer(catalog_app, name="catalog")
app.add_typer(outbox_app, name="outbox")
app.add_typer(incidents_app, name="incidents")
app.add_typer(baseline_app, name="baseline")
datahub_app = typer.Typer(help="Prepare a DataHub server for mlcopilot.", no_args_is_help=True)
app.add_typer(datahub_app, name="datahub")

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

P = ParamSpec("P")
R = TypeVar("R")


class OutputFormat(StrEnum):
    """Report formats of ``scan``."""

    table = "table"
    json = "json"
    markdown = "markdown"


class ListFormat(StrEnum):
    """Formats of ``incidents list``."""

    table = "table"
    json = "json"


class StateFilter(StrEnum):
    """Which incidents ``incidents list`` shows."""

    open = "open"
    acknowledged = "acknowledged"
    resolved = "resolved"
    all = "all"


def handle_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Print an expected error as one line on stderr and exit with its code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except MlCopilotError as exc:
            err.print(f"[bold red]error:[/] {escape(redact.redact(str(exc)))}")
            raise typer.Exit(exc.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception:  # a bug: say so, show where, and use an exit code of its own
            err.print(escape(redact.redact(traceback.format_exc())), end="")
            err.print("[bold red]internal error[/]: please report it with the traceback above")
            raise typer.Exit(4) from None

    return wrapper


CatalogOption = Annotated[
    str | None,
    typer.Option(
        "--catalog",
        help="lite:PATH (default lite:$MLCOPILOT_HOME/catalog.db, or $MLCOPILOT_CATALOG).",
        show_default=False,
    ),
]
StateOption = Annotated[
    str | None,
    typer.Option(
        "--state-url",
        help="SQLAlchemy URL of the state database (default $MLCOPILOT_STATE_URL, else "
        "sqlite:///$MLCOPILOT_HOME/state.db).",
        show_default=False,
    ),
]


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML configuration file (default $MLCOPILOT_CONFIG, else "
        "$MLCOPILOT_HOME/config.toml when present).",
        show_default=False,
    ),
]


_config_file: list[Path | None] = [None]
"""``--config`` of this invocation (set by the callback, read by :func:`_settings`)."""


@app.callback()
def main_options(config: ConfigOption = None) -> None:
    """Options every command takes (the help text is the app's)."""
    # Read by each command, not here, so `config init` works even beside a broken file.
    _config_file[0] = config


def _settings(catalog: str | None = None, state_url: str | None = None) -> Settings:
    """The settings for this command: ``--config`` (or its defaults) and the flags given."""
    return load_settings(_config_file[0], catalog=catalog, state_url=state_url)


@contextmanager
def _opened(settings: Settings) -> Iterator[tuple[Catalog, StateStore]]:
    cat = open_catalog(settings.catalog_spec, settings)
    try:
        store = open_state(settings)
        try:
            yield cat, store
        finally:
            store.close()
    finally:
        cat.close()


def parse_now(value: str | None) -> datetime:
    """``--now``: an ISO-8601 instant (UTC when no offset is given); default the current time."""
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"--now {value!r} is not an ISO-8601 time (e.g. 2026-11-29T12:00:00Z)"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@catalog_app.command("load")
@handle_errors
def catalog_load(
    files: Annotated[list[Path], typer.Argument(help="DataHub metadata files (JSON MCPs/MCEs).")],
    catalog: CatalogOption = None,
) -> None:
    """Load DataHub metadata files into the embedded catalog (streamed, all or nothing)."""
    import signal  # local to this command: cli.py is shared, its imports are not mine to edit

    from mlcopilot.catalog.loader import check_files

    settings = _settings(catalog=catalog)
    check_files(files)  # a missing file must not leave an empty catalog behind
    lite = open_lite(settings.catalog_spec)

    def stop(signum: int, frame: object) -> None:
        # Unwind like Ctrl-C: the load's transaction rolls back and the catalog stays as it was.
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with _load_progress() as progress:
            summary = load_metadata_files(lite, files, progress=progress)
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]: nothing was loaded, the catalog is as it was")
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        lite.close()
    out.print(
        f"Loaded {summary.records} records from {summary.files} file(s) into {lite.label}: "
        f"{summary.urns} entities, {summary.aspects} aspects, {summary.new_versions} new "
        f"aspect versions, {summary.patches} patches applied, {summary.skipped} skipped."
    )
    for skip in summary.skips:
        out.print(f"  skipped {escape(skip)}")
    if summary.skipped > len(summary.skips):
        out.print(f"  ... and {summary.skipped - len(summary.skips)} more skipped")


@contextmanager
def _load_progress() -> Iterator[Callable[[int, int], None]]:
    """``catalog load``'s progress: a bar by bytes on a terminal, else a line every 15 s."""
    import time

    from rich.progress import (
        DownloadColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    if err.is_terminal:
        columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
        with Progress(TextColumn("loading"), *columns, console=err, transient=True) as bar:
            task = bar.add_task("load", total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    started = last = time.monotonic()

    def line(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= 15:
            last = now
            rate = done / (now - started) / 1e6
            err.print(f"loading: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB ({rate:.1f} MB/s)")

    yield line


@app.command("scan")
@handle_errors
def scan_command(
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model urn to scan (repeatable; default: every mlModel)."),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
    now: Annotated[
        str | None, typer.Option(help="The clock, ISO-8601 (default: now).", show_default=False)
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="Report format.")
    ] = OutputFormat.table,
    output: Annotated[
        Path | None, typer.Option(help="Write the report to this file instead of stdout.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; show what would be written.")
    ] = False,
    fail_on: Annotated[
        Severity | None,
        typer.Option(help="Exit 1 when a finding is at or above this severity (CI gate)."),
    ] = None,
    max_hops: Annotated[int, typer.Option(help="Cap on lineage hops from the model.")] = 50,
    max_nodes: Annotated[int, typer.Option(help="Cap on nodes walked per model.")] = 10_000,
    deliver: Annotated[
        bool,
        typer.Option(
            "--deliver/--no-deliver",
            help="Deliver the write-back and notifications now (else leave them in the outbox "
            "for `mlcopilot outbox deliver`).",
        ),
    ] = True,
) -> None:
    """Walk every model's upstream lineage, check each node, track incidents and notify."""
    settings = _settings(catalog, state_url)
    notify = NotifySettings.from_settings(settings)
    options = ScanOptions(
        now=parse_now(now),
        models=tuple(model or ()),
        dry_run=dry_run,
        limits=WalkLimits(max_hops=max_hops, max_nodes=max_nodes),
    )
    checks = configured_checks(settings)
    with _opened(settings) as (cat, store), _progress() as progress:
        delivery = scan_delivery(notify, cat, OffsetClock(options.now), deliver=deliver)
        result = scan(cat, store, checks, options, progress=progress, delivery=delivery)
    for report in result.models:
        for error in report.errors:
            err.print(f"[yellow]warning:[/] {escape(error)}")
    _emit(_render(result, output_format), output, result)
    if fail_on is not None and any(f.severity.at_least(fail_on) for f in result.findings):
        raise typer.Exit(1)
    if result.relay is not None and not result.relay.ok:
        raise typer.Exit(5)


def _render(result: ScanResult, output_format: OutputFormat) -> str | None:
    if output_format is OutputFormat.json:
        return render_json(result)
    if output_format is OutputFormat.markdown:
        return render_markdown(result)
    return None


def _emit(text: str | None, output: Path | None, result: ScanResult) -> None:
    if text is None:
        if output is not None:
            _write_atomically(output, render_markdown(result))
        else:
            print_scan(result, out)
        return
    if output is None:
        sys.stdout.write(text)
    else:
        _write_atomically(output, text)
        err.print(f"Report written to {output}")
    if result.relay is not None:
        print_relay(result.relay, err)


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a temp file renamed over it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
        ) as tmp:
            tmp.write(text)
        os.replace(tmp.name, path)
    except OSError as exc:
        raise UsageError(f"--output {path}: cannot write: {exc.strerror}") from exc


@contextmanager
def _progress() -> Iterator[ScanProgress | None]:
    if not err.is_terminal:
        yield None
        return
    bar = Progress(
        TextColumn("Scanning"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task("", total=None)

    def advance(done: int, total: int, model: str) -> None:
        bar.update(task, completed=done, total=total, description=short_name(model))

    with bar:
        yield advance


@incidents_app.command("list")
@handle_errors
def incidents_list(
    model: Annotated[str | None, typer.Option(help="Only this model's incidents.")] = None,
    state: Annotated[StateFilter, typer.Option(help="Which incidents to show.")] = StateFilter.open,
    output_format: Annotated[ListFormat, typer.Option("--format")] = ListFormat.table,
    state_url: StateOption = None,
) -> None:
    """List incidents (open and acknowledged ones by default)."""
    store = open_state(_settings(state_url=state_url))
    try:
        incidents = store.incidents(model=model, include_resolved=state is not StateFilter.open)
    finally:
        store.close()
    incidents = [i for i in incidents if _state_matches(i, state)]
    if output_format is ListFormat.json:
        sys.stdout.write(render_incidents_json(incidents))
        return
    if not incidents:
        out.print(f"No {state.value} incidents.")
        return
    print_incidents(incidents, out)


def _state_matches(incident: Incident, wanted: StateFilter) -> bool:
    if wanted is StateFilter.all:
        return True
    if wanted is StateFilter.open:
        return incident.is_open
    return incident.state is IncidentState(wanted.value)


@incidents_app.command("ack")
@handle_errors
def incidents_ack(
    incident_id: Annotated[str, typer.Argument(metavar="ID", help="Incident id.")],
    by: Annotated[str | None, typer.Option(help="Who acknowledges (default: $USER).")] = None,
    state_url: StateOption = None,
) -> None:
    """Acknowledge an incident: someone is on it."""
    config = _settings(state_url=state_url)
    settings = NotifySettings.from_settings(config)
    store = open_state(config)
    try:
        now = datetime.now(UTC)
        current = store.get(incident_id)
        request = None
        if current is not None:
            request = hand_change_request(settings, store, current.model, resolving=None, at=now)
            request = replace(request, writeback=())
        incident = store.acknowledge(
            incident_id, by=by or getpass.getuser(), at=now, notify=request
        )
    finally:
        store.close()
    out.print(f"Acknowledged {incident.id} ({incident.check} at {short_name(incident.entity)}).")


@incidents_app.command("resolve")
@handle_errors
def incidents_resolve(
    incident_id: Annotated[str, typer.Argument(metavar="ID", help="Incident id.")],
    reason: Annotated[str, typer.Option(help="Why it is resolved.")] = "resolved by hand",
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Resolve an incident by hand and update the catalog (reopens if the risk is still there)."""
    config = _settings(catalog, state_url)
    settings = NotifySettings.from_settings(config)
    with _opened(config) as (cat, store):
        now = datetime.now(UTC)
        current = store.get(incident_id)
        request = None
        if current is not None:
            request = hand_change_request(
                settings, store, current.model, resolving=(incident_id, reason), at=now
            )
        incident = store.resolve(incident_id, at=now, reason=reason, notify=request)
        relay, datahub = build_relay(settings, cat, store, OffsetClock(now))
        report = relay.run()
    out.print(f"Resolved {incident.id} ({incident.check} at {short_name(incident.entity)}).")
    print_writes(datahub.applied, out, dry_run=False)
    print_relay(report, out)
    if not report.ok:
        raise typer.Exit(5)


class OutboxFilter(StrEnum):
    """Which rows ``outbox list`` shows."""

    waiting = "waiting"
    pending = "pending"
    sending = "sending"
    done = "done"
    dead = "dead"
    cancelled = "cancelled"
    all = "all"


@outbox_app.command("list")
@handle_errors
def outbox_list(
    status: Annotated[
        OutboxFilter, typer.Option(help="Which rows: waiting = pending, sending and dead.")
    ] = OutboxFilter.waiting,
    limit: Annotated[int, typer.Option(help="At most this many rows, newest first.")] = 100,
    output_format: Annotated[ListFormat, typer.Option("--format")] = ListFormat.table,
    state_url: StateOption = None,
) -> None:
    """List outbox rows: what is waiting to reach DataHub, GitHub and Slack, and what died."""
    store = open_state(_settings(state_url=state_url))
    try:
        statuses: list[OutboxStatus] | None
        if status is OutboxFilter.all:
            statuses = None
        elif status is OutboxFilter.waiting:
            statuses = [OutboxStatus.PENDING, OutboxStatus.SENDING, OutboxStatus.DEAD]
        else:
            statuses = [OutboxStatus(status.value)]
        items = store.outbox(statuses=statuses, limit=limit)
    finally:
        store.close()
    if output_format is ListFormat.json:
        sys.stdout.write(render_outbox_json(items))
        return
    if not items:
        out.print(f"No {status.value} outbox rows.")
        return
    print_outbox(items, out)


@outbox_app.command("retry")
@handle_errors
def outbox_retry(
    ids: Annotated[
        list[int] | None,
        typer.Argument(metavar="[ID]...", help="Dead rows to retry (default: all)."),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Make dead rows pending again and deliver everything that is due."""
    _deliver(catalog, state_url, retry_ids=ids or None, retry=True)


@outbox_app.command("deliver")
@handle_errors
def outbox_deliver(catalog: CatalogOption = None, state_url: StateOption = None) -> None:
    """Deliver every due outbox row (for a relay run apart from scans)."""
    _deliver(catalog, state_url, retry_ids=None, retry=False)


def _deliver(
    catalog: str | None, state_url: str | None, *, retry_ids: list[int] | None, retry: bool
) -> None:
    config = _settings(catalog, state_url)
    settings = NotifySettings.from_settings(config)
    with _opened(config) as (cat, store):
        now = datetime.now(UTC)
        if retry:
            retried = store.retry_outbox(retry_ids, now=now)
            out.print(f"{count(retried, 'dead row')} made pending again.")
        relay, datahub = build_relay(settings, cat, store, OffsetClock(now))
        report = relay.run()
    _print_delivery(report, len(datahub.applied))
    if not report.ok:
        raise typer.Exit(5)


def _print_delivery(report: RelayReport, applied: int) -> None:
    if not report.delivered and report.ok:
        out.print("Nothing was due.")
    elif applied:
        out.print(f"Write-back: {count(applied, 'change')} to the catalog.")
    print_relay(report, out)


@baseline_app.command("accept")
@handle_errors
def baseline_accept(
    model: Annotated[str, typer.Argument(help="The model urn whose upstream schemas to accept.")],
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Accept the current upstream schemas as the model's baseline (ends reported drift)."""
    with _opened(_settings(catalog, state_url)) as (cat, store):
        accepted = accept_baselines(cat, store, model, now=datetime.now(UTC))
    out.print(
        f"Accepted the current schema of {count(len(accepted), 'upstream dataset')} for "
        f"{short_name(model)}; the next scan resolves their drift incidents."
    )


DataHubOption = Annotated[
    str,
    typer.Option(
        "--catalog",
        help="datahub:URL (or datahub: to use DATAHUB_GMS_URL / ~/.datahubenv); mcp:URL is "
        "checked through the same server.",
    ),
]


@datahub_app.command("setup")
@handle_errors
def datahub_setup(
    catalog: DataHubOption = "datahub:",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what is missing.")] = False,
) -> None:
    """Create the tags and structured properties mlcopilot writes (idempotent)."""
    from mlcopilot.catalog.datahub.catalog import DataHubCatalog
    from mlcopilot.catalog.datahub.connection import settings_from_spec
    from mlcopilot.catalog.datahub.setup import setup_datahub

    location = _datahub_location(catalog)
    with DataHubCatalog.from_settings(settings_from_spec(location, _settings())) as target:
        result = setup_datahub(target, dry_run=dry_run)
    verb = "would create" if dry_run else "created"
    out.print(
        f"{target.label}: {verb} {len(result.created)}, already there {len(result.existing)}."
    )
    for urn in result.created:
        out.print(f"  + {escape(urn)}")


@app.command("doctor")
@handle_errors
def doctor_command(catalog: DataHubOption = "datahub:") -> None:
    """Check that a DataHub can be scanned and written back to, one line per check."""
    from mlcopilot.catalog.datahub.doctor import run_doctor

    kind = "mcp" if catalog.startswith("mcp:") else "datahub"
    checks = run_doctor(f"{kind}:{_datahub_location(catalog)}", config=_settings())
    for check in checks:
        mark = (
            "[green]pass[/]"
            if check.ok
            else ("[red]FAIL[/]" if check.required else "[yellow]warn[/]")
        )
        out.print(f"{mark}  {escape(check.name)}: {escape(check.detail)}")
    if any(not c.ok and c.required for c in checks):
        raise typer.Exit(1)


def _datahub_location(spec: str) -> str:
    kind, _, location = spec.partition(":")
    if kind not in {"datahub", "mcp"}:
        raise UsageError(f"--catalog {spec!r}: expected datahub:URL, datahub: or mcp:URL")
    return location


config_app = typer.Typer(help="See and start mlcopilot's configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")


class ConfigFormat(StrEnum):
    """Formats of ``config show``."""

    text = "text"
    json = "json"


@config_app.command("show")
@handle_errors
def config_show(
    output_format: Annotated[ConfigFormat, typer.Option("--format")] = ConfigFormat.text,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Print every effective setting, its value and its source (secrets redacted)."""
    from mlcopilot.settings_doc import effective_rows, render_json, render_text

    rows = effective_rows(_settings(catalog, state_url), _check_models())
    render = render_json if output_format is ConfigFormat.json else render_text
    sys.stdout.write(render(rows))


@config_app.command("init")
@handle_errors
def config_init(
    path: Annotated[
        Path | None,
        typer.Argument(help="Where to write it (default: print it). Never overwritten."),
    ] = None,
) -> None:
    """Write a commented starting configuration file (every key at its default)."""
    from mlcopilot.settings_doc import starting_file

    text = starting_file(_check_models())
    if path is None:
        sys.stdout.write(text)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as file:  # "x": never overwrite
            file.write(text)
    except FileExistsError:
        raise UsageError(f"{path} already exists; not overwriting it") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    err.print(f"Wrote {path}; uncomment what you change, then `mlcopilot config show`.")


def _check_models() -> dict[str, type[BaseModel]]:
    """Each available check's config model, from the registry when it offers them."""
    import mlcopilot.checks as registry

    models = getattr(registry, "check_config_models", None)
    return dict(models()) if callable(models) else {}


@app.command("checks")
def checks_command() -> None:
    """Describe every check: what it flags, why it matters, how to fix it."""
    for name, doc in describe_checks():
        out.print(f"[bold]{name}[/]")
        out.print(escape(doc))
        out.print()


@app.command("demo")
@handle_errors
def demo_command(
    home: Annotated[
        Path | None,
        typer.Option(help="Where the demo catalog and state go (default $MLCOPILOT_HOME/demo)."),
    ] = None,
) -> None:
    """Run the end-to-end demo on a fresh embedded DataHub catalog (no server needed)."""
    from mlcopilot.cli.demo_run import run_demo

    settings = _settings()
    run_demo(
        home or settings.home_path / "demo", out, notify=NotifySettings.from_settings(settings)
    )


def main() -> None:
    """Entry point of the ``mlcopilot`` command."""
    redact.install()
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
