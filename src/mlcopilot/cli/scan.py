"""``mlcopilot scan``: walk, check, track incidents, write back and notify; report and exit."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mlcopilot.cli._app import (
    AnnouncedWaits,
    CatalogOption,
    Every,
    MaxHopsOption,
    MaxNodesOption,
    NowOption,
    OutputsOption,
    StateOption,
    app,
    command_settings,
    err,
    out,
    write_atomically,
)
from mlcopilot.cli.scan_guard import (
    OutputFormat,
    opened_for_scan,
    paired_reports,
    scan_clock,
    walk_limits,
)
from mlcopilot.clock import OffsetClock, SystemClock
from mlcopilot.errors import UsageError
from mlcopilot.model import Severity
from mlcopilot.text.wording import count

if TYPE_CHECKING:
    from datetime import datetime

    from rich.console import Console

    from mlcopilot.clock import Clock
    from mlcopilot.incidents.gate import GateRules
    from mlcopilot.model import CheckInfo
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.notify.sinks.preview import RowPreview
    from mlcopilot.protocols import Catalog, StateStore
    from mlcopilot.report.html import ReportLinks
    from mlcopilot.report.sarif import Locator
    from mlcopilot.report.summary import ScanOutcome
    from mlcopilot.scan import ScanOptions, ScanResult
    from mlcopilot.scan.checking import Progress as ScanProgress
    from mlcopilot.service import Service
    from mlcopilot.settings import Settings


@app.command("scan")
def scan_command(
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model urn to scan (repeatable; default: every mlModel)."),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
    now: NowOption = None,
    output_format: Annotated[
        list[OutputFormat] | None,
        typer.Option(
            "--format",
            help="Report format: table, json, markdown, or a CI's own: junit (JUnit XML), "
            "sarif (SARIF 2.1.0, for code scanning), github (workflow annotations, and the "
            "markdown report appended to $GITHUB_STEP_SUMMARY when it is set), or html "
            "(one self-contained page, the lineage drawn: for --output). Repeatable, "
            "in pairs with --output: --format json --output r.json --format sarif --output "
            "r.sarif.  [default: table]",
            show_default=False,
        ),
    ] = None,
    output: OutputsOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; show what would be written.")
    ] = False,
    preview: Annotated[
        Path | None,
        typer.Option(
            "--preview",
            metavar="DIR",
            help="With --dry-run: save in DIR exactly what each configured notification sink "
            "would be sent, one JSON file per request (secrets replaced by placeholders), and "
            "list them. Nothing is sent. DIR must be new, empty or hold only earlier previews "
            "(they are replaced).",
            show_default=False,
        ),
    ] = None,
    write_back: Annotated[
        bool | None,
        typer.Option(
            "--write-back/--no-write-back",
            help="Write tags, properties, incidents and documents to the catalog (default: "
            "on, or [datahub] write_back / MLCOPILOT_WRITE_BACK). --no-write-back still "
            "records incidents and notifies: a shadow run.",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        Severity | None,
        typer.Option(help="Exit 1 when a finding is at or above this severity (CI gate)."),
    ] = None,
    fail_on_gaps: Annotated[
        bool | None,
        typer.Option(
            "--fail-on-gaps/--no-fail-on-gaps",
            help="Exit 1 too for a model not fully checked: a truncated walk, an upstream "
            "that all lacked metadata, a coverage gap (default: on with --fail-on).",
            show_default=False,
        ),
    ] = None,
    fail_on_acknowledged: Annotated[
        bool,
        typer.Option(
            "--fail-on-acknowledged/--ignore-acknowledged",
            help="Whether findings whose incident is acknowledged count toward --fail-on.",
        ),
    ] = True,
    fail_on_new: Annotated[
        bool,
        typer.Option(
            "--fail-on-new",
            help="Only findings whose incident this scan opens count toward --fail-on.",
        ),
    ] = False,
    json_version: Annotated[
        int,
        typer.Option(
            "--json-version", min=1, max=3, help="Version of the --format json report (1, 2, 3)."
        ),
    ] = 3,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Print only the closing summary and errors (a report asked for with --format "
            "is still written).",
        ),
    ] = False,
    max_hops: MaxHopsOption = 50,
    max_nodes: MaxNodesOption = 10_000,
    deliver: Annotated[
        bool,
        typer.Option(
            "--deliver/--no-deliver",
            help="Deliver the write-back and notifications now (else leave them in the outbox "
            "for `mlcopilot outbox deliver`).",
        ),
    ] = True,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="Scan every model together with the other `scan --shared` and `mlcopilot "
            "watch` processes on this state database (PostgreSQL): the full rescan is split "
            "into batches of watch.rescan_batch models, each scanned by whichever process "
            "claims it; reports the batches this one scanned, once no batch is left. Not with "
            "--model, --now or --dry-run.",
        ),
    ] = False,
) -> None:
    """Walk every model's upstream lineage, check each node, track incidents and notify."""
    from mlcopilot.service import Service

    # Whatever can fail locally fails here, before the scan reads or records anything, and
    # before the scan, the state store and the sinks are imported: a bad flag costs little.
    rules = _gate_rules(fail_on, fail_on_gaps, fail_on_acknowledged, fail_on_new)
    _check_preview(preview, dry_run=dry_run)
    _check_shared(shared, model=model, now=now, dry_run=dry_run)
    clock_now = scan_clock(now)
    limits = walk_limits(max_hops, max_nodes)
    settings = command_settings(catalog, state_url)
    service = Service.from_settings(settings, write_back=write_back)
    reports = paired_reports(output_format or [OutputFormat.table], output or [])
    locator = _sarif_locator(settings, reports)  # a bad [sarif] dbt_manifest fails here

    from mlcopilot.scan import ScanOptions

    started = time.monotonic()
    options = ScanOptions(now=clock_now, models=tuple(model or ()), dry_run=dry_run, limits=limits)
    interrupts = _Interrupts(dry_run=dry_run, deliver=deliver, shared=shared)
    try:
        with interrupts.installed():
            code = _scan_and_report(
                service,
                settings,
                options,
                interrupts,
                reports=reports,
                rules=rules,
                locator=locator,
                json_version=json_version,
                fail_on=fail_on,
                quiet=quiet,
                deliver=deliver,
                started=started,
                preview=preview,
                shared=shared,
            )
    except KeyboardInterrupt:
        err.print(f"[bold red]interrupted[/]: {escape(interrupts.said())}", soft_wrap=True)
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)


def _scan_and_report(
    service: Service,
    settings: Settings,
    options: ScanOptions,
    interrupts: _Interrupts,
    *,
    reports: Sequence[tuple[OutputFormat, Path | None]],
    rules: GateRules | None,
    locator: Locator | None,
    json_version: int,
    fail_on: Severity | None,
    quiet: bool,
    deliver: bool,
    started: float,
    preview: Path | None = None,
    shared: bool = False,
) -> int:
    """Scan, write the reports and the closing summary; the exit code (0, 1 or 5).

    With ``preview`` (a dry run's), what the configured sinks would be sent is saved there and
    listed before the closing summary.
    """
    from mlcopilot.incidents.gate import evaluate_gate
    from mlcopilot.report.summary import ScanOutcome

    with (
        opened_for_scan(settings, dry_run=options.dry_run) as (cat, store),
        _progress(quiet=quiet) as progress,
    ):
        # A shared scan records each batch on the wall clock (it refuses --now): so does its relay.
        clock = SystemClock() if shared else OffsetClock(options.now)
        # The relay may wait (group_wait, a retry): said on stderr, so a CI log never looks hung.
        waits = clock if quiet else AnnouncedWaits(clock, err)
        try:
            if shared:
                result = _shared_scan(
                    service,
                    settings,
                    (cat, store),
                    options,
                    waits,
                    interrupts,
                    deliver=deliver,
                    progress=interrupts.watched(progress),
                )
            else:
                result = service.scan(
                    cat,
                    store,
                    options,
                    clock=waits,
                    deliver=deliver,
                    progress=interrupts.watched(progress),
                    steps=interrupts.step,
                )
        finally:
            interrupts.settle()
        interrupts.scanned = True
        links = _html_links(reports, store, service.notify.datahub_url)
        rows = None if preview is None else _preview_rows(result, store, service.notify)
    listing = None
    if preview is not None and rows is not None:
        listing = _save_previews(preview, rows, configured=bool(service.notify.sinks))
    verdict = None if rules is None else evaluate_gate(rules, result.models, result.changes)
    closing = ScanOutcome(result, verdict, time.monotonic() - started)
    for report in result.models:
        for error in report.errors:
            err.print(f"[yellow]warning:[/] {escape(error)}")
    infos = [check.info for check in service.checks]
    # The report for stdout (or else the last one) is emitted last, with the closing summary.
    *others, last = sorted(reports, key=lambda pair: pair[1] is None)
    for each_format, path in others:
        if path is None:  # never: paired_reports lets at most one report go to stdout
            continue
        text = _render(closing, each_format, json_version, infos, fail_on, links, locator)
        write_atomically(path, text or "")
        if not quiet:
            err.print(f"Report written to {path}")
    text = _render(closing, last[0], json_version, infos, fail_on, links, locator)
    _emit(text, last[1], closing, quiet=quiet, before_summary=None if quiet else listing)
    if verdict is not None and not verdict.passed:
        return 1
    if result.relay is not None and not result.relay.ok:
        return 5
    return 0


class _Interrupts:
    """Ctrl-C and ``SIGTERM`` during a scan, and what it had recorded when one came.

    Both stop the scan as an interrupt (as they stop ``catalog load``), said in one line with
    what was and was not recorded, exit 130. While the scan is being recorded (its one
    transaction, ``before_commit`` to ``after_commit``) a signal waits for the transaction to
    end, so the scan is then recorded or not, never in doubt. The relay's steps say which
    outbox row, if any, was being sent.
    """

    def __init__(self, *, dry_run: bool, deliver: bool, shared: bool = False) -> None:
        self._dry_run = dry_run
        self._deliver = deliver
        self._shared = shared
        self._recording = False
        self._pending = False
        self.recorded = False
        """The scan's transaction committed."""
        self.scanned = False
        """The scan (and its delivery) finished: what remained was writing the reports."""
        self.sending: str | None = None
        """The sink of the outbox row being sent (its ``before_send`` seen, not yet done)."""

    @contextmanager
    def installed(self) -> Iterator[None]:
        """SIGINT and SIGTERM handled as said above, for the block (on the main thread)."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {each: signal.signal(each, self._signalled) for each in signals}
        try:
            yield
        finally:
            for each, handler in previous.items():
                signal.signal(each, handler)

    def _signalled(self, signum: int, frame: object) -> None:
        self._pending = True
        if self._recording:
            return  # raised once the transaction has ended
        # Python runs a handler between any two bytecodes, a garbage collector's weakref
        # callback included, and an exception raised there is printed and dropped: the flag
        # stays set, so the next model or the recording stops the scan all the same.
        raise KeyboardInterrupt

    def _stop_if_signalled(self) -> None:
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    def watched(self, progress: ScanProgress | None) -> ScanProgress:
        """``progress``, stopping the scan before the next model once a signal has come."""

        def advance(done: int, total: int, model: str) -> None:
            self._stop_if_signalled()
            if progress is not None:
                progress(done, total, model)

        return advance

    def step(self, name: str) -> None:
        """One step of the scan or its relay (the failpoints' names)."""
        if name == "before_commit":
            self._stop_if_signalled()  # a signal dropped mid-walk: nothing is recorded
            self._recording = True
        elif name == "after_commit":
            self.recorded = True
            self.settle()
        elif name.startswith("before_send:"):
            self.sending = name.partition(":")[2]
        elif name.startswith("after_done:"):
            self.sending = None

    def settle(self) -> None:
        """The transaction is over (committed, or the scan failed): an interrupt waiting goes."""
        self._recording = False
        self._stop_if_signalled()

    def said(self) -> str:
        """What was and was not recorded, in one sentence."""
        if self._shared and not self.scanned:
            return (
                "the batches of the shared rescan this scan finished were recorded (their "
                "write-back and notifications wait in the outbox: `mlcopilot outbox deliver` "
                "sends them); the batch in progress was not, and is due again for another "
                "scanner or watcher to take"
                if self.recorded
                else "nothing was recorded by this scan; the batch in progress is due again for "
                "another scanner or watcher to take"
            )
        if not self.recorded:
            if self._dry_run:
                return "nothing was recorded or written (a dry run records nothing)"
            return (
                "nothing was recorded: the scan stopped before it stored its results, so the "
                "state database and the catalog are as they were; scan again"
            )
        if self.scanned:
            delivery = (
                "its delivery ran (`mlcopilot outbox list` shows what is left)"
                if self._deliver
                else "its write-back and notifications wait in the outbox (--no-deliver)"
            )
            return f"the scan was recorded and {delivery}; only its report was not finished"
        said = (
            "the scan was recorded, but its delivery was cut short: the write-back and "
            "notifications not yet delivered wait in the outbox (`mlcopilot outbox list`; "
            "`mlcopilot outbox deliver` sends them)"
        )
        if self.sending is not None:
            said += (
                f"; the {self.sending} one being sent may have gone out: it stays claimed "
                f"until its lease ends (2 minutes), then is checked against {self.sending} "
                "before it is sent again"
            )
        return said


def _check_preview(folder: Path | None, *, dry_run: bool) -> None:
    """``--preview DIR`` goes with ``--dry-run``, to a folder it may fill; checked first."""
    if folder is None:
        return
    if not dry_run:
        raise UsageError(
            f"--preview {folder}: only with --dry-run (it shows what a scan would send, and "
            "sends nothing)"
        )
    from mlcopilot.cli.render.previews import check_folder

    check_folder(folder, "--preview")


def _preview_rows(
    result: ScanResult, store: StateStore, notify: NotifySettings
) -> list[RowPreview]:
    """What the configured sinks would be sent for the dry run's rows (nothing is sent).

    A row whose group already lives in its sink (an issue, a thread) goes where it lives.
    """
    from mlcopilot.notify.sinks.preview import preview_rows

    return preview_rows(
        result.notifications,
        notify,
        now=result.now,
        refs=lambda row: store.sink_ref(row.group_key, row.group_generation, row.sink),
    )


def _save_previews(
    folder: Path, rows: Sequence[RowPreview], *, configured: bool
) -> Callable[[Console], None]:
    """Save each previewed request in ``folder`` (earlier previews replaced); print the list.

    Returns:
        What prints the list, once the reports are written (before the closing summary).
    """
    from mlcopilot.cli.render import previews as shown

    requests = [preview for row in rows for preview in row.previews]
    try:
        shown.clear(folder)
        folder.mkdir(parents=True, exist_ok=True)
        saved = [shown.save(folder, n, preview) for n, preview in enumerate(requests, start=1)]
    except OSError as exc:
        raise UsageError(f"--preview {folder}: cannot write: {exc.strerror}") from exc
    return lambda console: shown.print_dry_run(rows, saved, folder, console, configured=configured)


def _gate_rules(
    fail_on: Severity | None, gaps: bool | None, acknowledged: bool, new_only: bool
) -> GateRules | None:
    """The gate ``--fail-on`` and its flags ask for; None: no gate. Checked before the scan."""
    from mlcopilot.incidents.gate import GateRules

    if fail_on is None:
        modifiers = (("--fail-on-new", new_only), ("--ignore-acknowledged", not acknowledged))
        alone = [flag for flag, given in modifiers if given]
        if alone:
            raise UsageError(f"{' and '.join(alone)}: only with --fail-on SEVERITY")
        if not gaps:  # --fail-on-gaps alone gates on coverage only
            return None
    return GateRules(
        fail_on=fail_on,
        fail_on_gaps=gaps if gaps is not None else True,
        acknowledged=acknowledged,
        new_only=new_only,
    )


def _render(
    closing: ScanOutcome,
    output_format: OutputFormat,
    json_version: int,
    checks: Sequence[CheckInfo],
    fail_on: Severity | None,
    links: ReportLinks | None = None,
    locator: Locator | None = None,
) -> str | None:
    from mlcopilot.report.json import render_json, render_markdown

    if output_format is OutputFormat.html:
        from mlcopilot.report.html import render_html

        return render_html(closing.result, closing=closing, links=links, checks=checks)
    if output_format is OutputFormat.junit:
        from mlcopilot.report.junit import render_junit

        return render_junit(closing.result, checks, fail_on)
    if output_format is OutputFormat.sarif:
        from mlcopilot.report.sarif import render_sarif

        return render_sarif(closing.result, checks, locator)
    if output_format is OutputFormat.github:
        from mlcopilot.report.github import append_step_summary, render_github

        try:
            append_step_summary(render_markdown(closing.result, closing))
        except OSError as exc:
            raise UsageError(f"$GITHUB_STEP_SUMMARY: cannot write: {exc.strerror}") from exc
        return render_github(closing.result, closing.verdict)

    if output_format is OutputFormat.json:
        return render_json(
            closing.result,
            version=json_version,
            verdict=closing.verdict,
            seconds=closing.seconds or 0.0,
        )
    if output_format is OutputFormat.markdown:
        return render_markdown(closing.result, closing)
    return None


def _sarif_locator(
    settings: Settings, reports: Sequence[tuple[OutputFormat, Path | None]]
) -> Locator | None:
    """Where SARIF results point in the repository (``[sarif]``); None: no SARIF asked for."""
    if all(each_format is not OutputFormat.sarif for each_format, _ in reports):
        return None
    from mlcopilot.report.sarif import locator_from_settings

    return locator_from_settings(settings)


def _html_links(
    reports: Sequence[tuple[OutputFormat, Path | None]], store: StateStore, datahub_url: str | None
) -> ReportLinks | None:
    """Where an HTML report may link (read while the store is open); None: no HTML asked for."""
    if all(each_format is not OutputFormat.html for each_format, _ in reports):
        return None
    from mlcopilot.report.html import report_links

    return report_links(store, datahub_url)


def _emit(
    text: str | None,
    output: Path | None,
    closing: ScanOutcome,
    *,
    quiet: bool,
    before_summary: Callable[[Console], None] | None = None,
) -> None:
    """Write the report where asked, then the closing summary as the last lines.

    The summary goes to stdout, unless stdout carries a JSON or markdown report: then to
    stderr, so the report stays parseable. ``before_summary`` prints on the summary's console
    just before it (the previews' list).
    """
    from mlcopilot.cli.render.terminal import print_relay, print_scan
    from mlcopilot.report.json import render_markdown
    from mlcopilot.report.summary import print_summary

    result = closing.result
    if text is None:
        if output is not None:
            write_atomically(output, render_markdown(result, closing))
        elif not quiet:
            print_scan(result, out)
        if before_summary is not None:
            before_summary(out)
        print_summary(closing, out)
        return
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
        if not quiet:
            err.print(f"Report written to {output}")
    if result.relay is not None and not quiet:
        print_relay(result.relay, err)
    if before_summary is not None:
        before_summary(err if output is None else out)
    print_summary(closing, err if output is None else out)


@contextmanager
def _progress(*, quiet: bool = False) -> Iterator[ScanProgress | None]:
    """A bar on a terminal; off one, a line every 15 s (a CI log), none with --quiet."""
    if not err.is_terminal:
        yield None if quiet else _progress_lines()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mlcopilot.text.names import short_name

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
        # The last call names no model: every walk is done, the scan records and writes.
        what = short_name(model) if model else "recording and writing back"
        bar.update(task, completed=done, total=total, description=what)

    with bar:
        yield advance


def _progress_lines() -> ScanProgress:
    """``scanning: 37 of 100 models done, now model_0037, 15 s``, at most every 15 s."""
    from mlcopilot.text.names import short_name

    every = Every()

    def line(done: int, total: int, model: str) -> None:
        if every.due():
            at = f", now {short_name(model)}" if model else ", recording and writing back"
            err.print(
                f"scanning: {done} of {count(total, 'model')} done{escape(at)}, "
                f"{every.elapsed():.0f} s",
                soft_wrap=True,
            )

    return line


def _check_shared(
    shared: bool, *, model: Sequence[str] | None, now: str | None, dry_run: bool
) -> None:
    """``--shared`` scans every model on the wall clock and records: checked first."""
    if not shared:
        return
    for flag, given in (
        ("--model", bool(model)),
        ("--now", now is not None),
        ("--dry-run", dry_run),
    ):
        if given:
            raise UsageError(
                f"--shared with {flag}: a shared scan is the full rescan of every model, "
                "recorded batch by batch on the clock of the moment (other processes record "
                "theirs meanwhile)"
            )


def _shared_scan(
    service: Service,
    settings: Settings,
    opened: tuple[Catalog, StateStore],
    options: ScanOptions,
    clock: Clock,
    interrupts: _Interrupts,
    *,
    deliver: bool,
    progress: ScanProgress | None,
) -> ScanResult:
    """Take part in the full rescan shared through ``store``; the batches this scan did.

    Each batch is an ordinary scan of its models, committed with its deliveries left in the
    outbox; one relay run after the last delivers them (``--deliver``, the default).
    """
    from dataclasses import replace

    from mlcopilot.scan.selection import on_shared_clock
    from mlcopilot.scan.shared import merged, owner_name, run_shared
    from mlcopilot.scan.wiring import open_state

    catalog, store = opened

    def scan_batch(models: Sequence[str]) -> ScanResult:
        # The clock of the moment: another process may have recorded a batch meanwhile, and a
        # scan never runs on a clock earlier than the last one recorded.
        def scan_at(now: datetime) -> ScanResult:
            batch = replace(options, now=now, models=tuple(models))
            return service.scan(
                catalog, store, batch, deliver=False, progress=progress, steps=interrupts.step
            )

        return on_shared_clock(store, scan_at)

    run = run_shared(
        store,
        catalog,
        scan_batch,
        owner=owner_name(),
        size=settings.watch.rescan_batch,
        reason="mlcopilot scan --shared",
        renewals=lambda: open_state(settings, create=False),
        retry_backoff=settings.watch.retry_backoff,
    )
    delivery = service.delivery(catalog, clock, deliver=deliver)
    return merged(run, catalog=catalog, store=store, delivery=delivery, now=clock.now())
