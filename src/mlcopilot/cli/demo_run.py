"""`mlcopilot demo`: the whole loop on a fresh embedded DataHub catalog, in under a minute.

It loads real DataHub metadata files (shipped in ``mlcopilot/demo_data``; built by
``scripts/build_demo_data.py``) into DataHub Lite, scans, changes an upstream schema, scans
again, shows the write-back, and resolves an incident when the column comes back. The demo's
clock is fixed, so every run tells the same story. It ends with ``mlcopilot report``'s HTML page
(:func:`mlcopilot.report.html.report_page`), written to ``<home>/report.html``.

It also shows what each scan sends to GitHub, Slack, PagerDuty, Teams and a signed webhook:
the real sinks render the requests, which are recorded instead of sent
(:mod:`mlcopilot.notify.sinks.preview`), printed, and saved under ``<home>/notifications`` (one
JSON file per request: its method and path, and its body; :mod:`mlcopilot.cli.render.previews`).
The first GitHub issue and the first Slack message are shown whole (what people read); every
other request is a line or two, PagerDuty's, Teams' and the webhook's one line each (their
content is the same story, and a webhook's JSON is for a program: its file has it all). Only
with ``--send`` and a sink's credentials set (``GITHUB_TOKEN`` + ``MLCOPILOT_GITHUB_REPO``,
``SLACK_BOT_TOKEN`` + ``MLCOPILOT_SLACK_CHANNEL`` or ``SLACK_WEBHOOK_URL``,
``MLCOPILOT_PAGERDUTY_ROUTING_KEY``, ``MLCOPILOT_TEAMS_WEBHOOK_URL``, ``MLCOPILOT_WEBHOOK_URL`` +
``MLCOPILOT_WEBHOOK_SECRET``) are they really sent.

The demo is harmless: it runs in a new temporary folder unless told otherwise, uses a given
folder only when it is empty or an earlier demo's (marked by :data:`MARKER`), and removes only
the files a demo makes.
"""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib.resources import as_file, files
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule

from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks import load_checks
from mlcopilot.cli._app import write_atomically
from mlcopilot.cli.render import previews as shown
from mlcopilot.cli.render.terminal import print_scan, safe
from mlcopilot.clock import OffsetClock
from mlcopilot.errors import UsageError
from mlcopilot.incidents.payload import Sink
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY
from mlcopilot.model import IncidentWrite
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.preview import (
    PREVIEW_SINKS,
    PREVIEW_WEBHOOK_SECRET,
    Preview,
    PreviewClock,
    PreviewGitHub,
    PreviewPagerDuty,
    PreviewSlack,
    PreviewTargets,
    PreviewTeams,
    PreviewWebhook,
)
from mlcopilot.protocols import StateStore
from mlcopilot.report.html import report_page
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.scan.delivery import notification_sinks
from mlcopilot.store import default_state_url, open_store
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
SCAN_TIMES = (
    datetime(2026, 11, 20, 9, tzinfo=UTC),
    datetime(2026, 11, 21, 9, tzinfo=UTC),
    datetime(2026, 11, 22, 9, tzinfo=UTC),
)


MARKER = ".mlcopilot-demo"
"""The file that marks a folder as a demo's home (so a later demo may reuse it)."""
REPORT = "report.html"
"""The demo's HTML report, in its home."""
_MADE = (
    *(
        f"{db}{suffix}"
        for db in ("catalog.db", "state.db")
        for suffix in ("", "-wal", "-shm", "-journal")
    ),
    REPORT,
)
"""The files a demo makes in its home, besides its notifications folder."""
_SAVED = shown.SAVED_GLOB
"""The notification requests a demo saves (``001-github-open.json``...)."""
_HINTS = {
    "github": "GITHUB_TOKEN, MLCOPILOT_GITHUB_REPO",
    "slack": "SLACK_BOT_TOKEN and MLCOPILOT_SLACK_CHANNEL (or SLACK_WEBHOOK_URL)",
    "pagerduty": "MLCOPILOT_PAGERDUTY_ROUTING_KEY",
    "teams": "MLCOPILOT_TEAMS_WEBHOOK_URL",
    "webhook": "MLCOPILOT_WEBHOOK_URL and MLCOPILOT_WEBHOOK_SECRET",
}
"""What sends each sink's requests (with ``--send``)."""
_IN_FULL = ("github", "slack")
"""The sinks whose first message is shown whole: what people read. The others' requests are
one line each (a Teams card tells what the Slack message tells; PagerDuty's is its summary
line; the webhook's JSON is for a program, and its file has it whole)."""
FRAMED = 80
"""The width of the demo's rules off a terminal (a file, a CI log), whose console is unwrapped
(:data:`mlcopilot.cli.display.UNWRAPPED`): no line is padded to 10,000 columns."""


def prepare_home(home: Path | None, console: Console) -> Path:
    """The demo's home: a new temporary folder, or ``home`` when empty or an earlier demo's.

    An earlier demo's files are removed (only those); anything else in a given folder makes
    it refused, so the demo never replaces a real catalog or state database.

    Raises:
        UsageError: ``home`` holds files no demo made, or no folder can be made.
    """
    if home is None:
        try:
            path = Path(tempfile.mkdtemp(prefix="mlcopilot-demo-"))
        except OSError as exc:
            raise UsageError(
                f"cannot create a temporary folder for the demo: {exc.strerror}; "
                "pass --home DIR (an empty folder)"
            ) from exc
        what = "a new temporary folder; delete it when you are done"
    else:
        path = home.expanduser()
        if path.exists() and not path.is_dir():
            raise UsageError(f"--home {home}: not a folder")
        earlier = (path / MARKER).is_file()
        if path.is_dir() and not earlier and any(path.iterdir()):
            raise UsageError(
                f"--home {home}: the folder holds files no demo made, and the demo would "
                "replace its catalog and state; use an empty or new folder, or leave out --home"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--home {home}: cannot create it: {exc.strerror}") from exc
        what = "an earlier demo's folder, made afresh" if earlier else "an empty folder"
    try:
        (path / MARKER).write_text(
            "Made by `mlcopilot demo`: its catalog.db, state.db, report.html and notifications/ "
            "are made afresh on each run.\n",
            encoding="utf-8",
        )
        for name in _MADE:
            (path / name).unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write the demo's files in {path}: {exc.strerror}") from exc
    console.print(f"Demo home: {escape(str(path))} ({what}).")
    return path


def run_demo(
    home: Path, console: Console, notify: NotifySettings, targets: PreviewTargets | None = None
) -> list[Preview]:
    """Run the demo in ``home`` (from :func:`prepare_home`): catalog and state from scratch.

    Only the sinks ``notify`` configures are really sent to; pass settings without sinks
    (the default of ``mlcopilot demo``) to only show and save what would be sent.
    ``targets`` are the repository, label, channel... the previews address (default:
    placeholders; never a secret).

    Returns:
        The requests previewed (not sent), in the order the sinks made them.
    """
    catalog_path = home / "catalog.db"
    notifications = _Notifications(
        notify, targets or PreviewTargets(), home / "notifications", console
    )
    catalog = open_lite_catalog(catalog_path, create=True)
    store = open_store(default_state_url(home), create=True)
    try:
        _story(catalog, store, catalog_path, home, console, notifications)
    finally:
        store.close()
        catalog.close()
    return notifications.sent


class _Notifications:
    """Real sinks where credentials are set, previews elsewhere; prints what went out."""

    def __init__(
        self, settings: NotifySettings, targets: PreviewTargets, folder: Path, console: Console
    ) -> None:
        self.settings = settings
        self.console = console
        self.folder = folder
        self.sent: list[Preview] = []  # every preview appends here, in request order
        self.clock = PreviewClock()  # the scan's time: set by sinks()
        url = settings.datahub_url
        sent, clock = self.sent, self.clock
        self.previews: list[Sink] = [
            PreviewGitHub(targets.github, datahub_url=url, sent=sent),
            PreviewSlack(targets.slack, datahub_url=url, sent=sent),
            PreviewPagerDuty(targets.pagerduty, datahub_url=url, sent=sent, clock=clock),
            PreviewTeams(targets.teams, datahub_url=url, sent=sent, clock=clock),
            PreviewWebhook(targets.webhook, datahub_url=url, sent=sent, clock=clock),
        ]
        self._shown = 0
        self._saved = 0
        self._full_shown: set[str] = set()
        self._hinted: set[str] = set()
        for old in folder.glob(_SAVED) if folder.exists() else ():
            old.unlink()  # an earlier run's requests: only the files a demo saves

    @property
    def previewed(self) -> set[str]:
        """The sinks shown rather than sent (no credentials for them)."""
        return set(PREVIEW_SINKS) - set(self.settings.sinks)

    def sinks(self, when: datetime) -> list[Sink]:
        real = notification_sinks(self.settings, OffsetClock(when))
        names = {s.name for s in real}
        self.clock.at = when
        previews = [p for p in self.previews if p.name not in names]
        return [*real, *previews]

    def delivery(self, when: datetime) -> Delivery:
        # The demo's clock jumps days between scans: no group_wait, so nothing waits for real.
        policy = replace(self.settings.policy, group_wait=timedelta(0))
        return Delivery(sinks=self.sinks(when), policy=policy, clock=OffsetClock(when))

    def show(self, result: ScanResult) -> None:
        fresh = self.sent[self._shown :]
        self._shown = len(self.sent)
        sent = [i for i in (result.relay.delivered if result.relay else []) if i.sink != "datahub"]
        for item in sent:
            if item.sink in self.settings.sinks:
                self.console.print(
                    f"[green]Sent[/] to {item.sink}: {item.action} ({item.dedupe_key})"
                )
        if not fresh:
            return
        self.console.print()
        self.console.print(
            f"[bold]What {escape(shown.sinks_named([p.sink for p in fresh]))} would receive[/] "
            f"({count(len(fresh), 'request')}, as the sinks render them; saved under "
            f"{escape(str(self.folder))}):"
        )
        for preview in fresh:
            self._saved += 1
            shown.save(self.folder, self._saved, preview)
            if preview.sink not in _IN_FULL:
                self.console.print(f"  [cyan]{preview.sink}[/] {safe(shown.describe(preview))}")
                continue
            if preview.action == "open":
                self._show_in_full(preview)
            self.console.print(
                f"  [cyan]{preview.sink}[/] {escape(preview.request)} ({preview.action}) "
                f"[dim]— preview: to send it: {_HINTS[preview.sink]} and --send[/]"
            )
            self.console.print(f"    {escape(shown.summary(preview))}")
        # Said once, under the first of their lines: where the one-line previews come from.
        others = [
            s
            for s in PREVIEW_SINKS
            if s not in _IN_FULL and s not in self._hinted and any(p.sink == s for p in fresh)
        ]
        self._hinted.update(others)
        if others:
            how = "; ".join(f"{s}: {_HINTS[s]}" for s in others)
            self.console.print(f"  [dim]— previews: to send them: {how}; and --send[/]")
        if "webhook" in others:
            self.console.print(
                "  [dim]— the webhook's previews are signed with the placeholder secret "
                f"{PREVIEW_WEBHOOK_SECRET} (a receiver's check can be tried with it); with "
                "--send, your secret signs them[/]"
            )

    def _show_in_full(self, preview: Preview) -> None:
        """The first issue body and the first Slack message, whole: what people will read."""
        if preview.sink in self._full_shown:
            return
        self._full_shown.add(preview.sink)
        if preview.sink == "github":
            title = f"GitHub issue: {preview.payload['title']}"
            text = str(preview.payload["body"])
        else:
            title = "Slack message (Block Kit, shown as its text)"
            blocks = preview.payload.get("blocks", [])
            text = "\n".join(shown.block_text(b) for b in blocks)
        if self.console.is_terminal:
            self.console.print(Panel(escape(text), title=escape(title), title_align="left"))
            return
        # Off a terminal (a file, a CI log) the console is unwrapped, so a panel would pad
        # every line to its width: the text as plain lines between two short rules instead.
        self.console.print(Rule(escape(title), align="left"), width=FRAMED)
        self.console.print(escape(text), soft_wrap=True)
        self.console.print(Rule(), width=FRAMED)


def _story(
    catalog: LiteCatalog,
    store: StateStore,
    catalog_path: Path,
    home: Path,
    console: Console,
    notifications: _Notifications,
) -> None:
    checks = load_checks()

    def run_scan(when: datetime) -> ScanResult:
        options = ScanOptions(now=when)
        result = scan(catalog, store, checks, options, delivery=notifications.delivery(when))
        print_scan(result, console, previewed=notifications.previewed)
        notifications.show(result)
        return result

    _step(console, "1/5", "Build a DataHub catalog (DataHub Lite, embedded — no server)")
    summary = _load(catalog, "01_catalog.json")
    console.print(
        f"Loaded {summary} from DataHub metadata files: the MLModel churn_predictor_v1, trained "
        "2026-10-01 on curated.customer_360, with two MLFeatures fed by raw.customers (an email "
        "column tagged PII) and raw.transactions (24 h freshness SLA), and a deprecated "
        "legacy.customer_segments upstream of the curated table (column-level lineage)."
    )

    _step(console, "2/5", f"First scan, {SCAN_TIMES[0]:%Y-%m-%d %H:%M} UTC")
    console.print(
        "The walk follows model → features → feature table → datasets, and the training data "
        "DataHub's own lineage index does not follow. Upstream schemas are recorded as the "
        "model's baseline."
    )
    run_scan(SCAN_TIMES[0])

    _step(console, "3/5", "Upstream change: raw.customers renames `country`, drops `signup_date`")
    _load(catalog, "02_schema_change.json")
    console.print("Nothing breaks loudly. The feature `tenure_days` reads `signup_date`.")
    second = run_scan(SCAN_TIMES[1])

    _step(console, "4/5", "What the next person opening raw.customers in DataHub sees")
    _show_writeback(catalog, second, catalog_path, console)

    _step(console, "5/5", "The upstream team restores `signup_date`")
    _load(catalog, "03_restore_column.json")
    third = run_scan(SCAN_TIMES[2])
    resolved = ", ".join(f"{i.id} ({i.check}, {i.field})" for i in third.changes.resolved)
    console.print(f"[green]Resolved:[/] {escape(resolved or 'nothing')}.")
    console.print(
        "The rename stays reported until someone accepts the new schema with "
        "`mlcopilot baseline accept MODEL`.\n"
    )
    # The demo's own home in every command, so nothing mixes into your default state; its
    # clock ran ahead of yours if today is before its last scan, and scans move forward.
    env = f"MLCOPILOT_HOME={shlex.quote(str(home))}"
    clock = ""
    if datetime.now(UTC) < SCAN_TIMES[-1]:
        clock = f" --now {(SCAN_TIMES[-1] + timedelta(days=1)):%Y-%m-%dT%H:%M:%SZ}"
    console.print(
        f"Try it yourself: [bold]{escape(env)} mlcopilot incidents list[/] · "
        f"[bold]{escape(env)} mlcopilot scan{clock} --format json[/]"
    )
    # The page `mlcopilot report` writes, by the same code: a dry run at the last scan's time.
    options = ScanOptions(now=SCAN_TIMES[-1], dry_run=True)
    datahub_url = notifications.settings.datahub_url
    _, page = report_page(catalog, store, checks, options, datahub_url=datahub_url)
    report = home / REPORT
    write_atomically(report, page)
    # One line however narrow the terminal: a wrapped address cannot be clicked or pasted.
    where = escape(report.resolve().as_uri())
    console.print(f"HTML report (open it in a browser): {where}", soft_wrap=True)


def _load(catalog: LiteCatalog, name: str) -> str:
    with as_file(files("mlcopilot") / "demo_data" / name) as path:
        summary = load_metadata_files(catalog, [path])
    return f"{count(summary.records, 'aspect')} for {count(summary.urns, 'entity')}"


def _show_writeback(catalog: LiteCatalog, result: ScanResult, path: Path, console: Console) -> None:
    nodes = catalog.nodes([CUSTOMERS, MODEL])
    tags = ", ".join(sorted(short_name(t) for t in nodes[CUSTOMERS].tags))
    risks = nodes[MODEL].structured_properties.get(OPEN_RISKS_PROPERTY.rsplit(":", 1)[-1], ())
    console.print(f"raw.customers tags: {escape(tags)}")
    console.print(
        f"churn_predictor_v1 io.mlcopilot.openRisks: {escape(', '.join(map(str, risks)))}"
    )
    incident = next((w for w in result.writes if isinstance(w, IncidentWrite)), None)
    console.print(
        "Every incident is a native DataHub incident plus a document with the full context "
        "(what changed, the lineage path, evidence, suggested action)."
    )
    if incident is not None:
        console.print(
            "Look with DataHub's own CLI (note: `datahub lite init` points ~/.datahubenv at "
            "this file):\n"
            f"  datahub lite init --type sqlite --file {escape(str(path))}\n"
            f"  datahub lite get --urn '{escape(incident.urn)}'"
        )


def _step(console: Console, number: str, title: str) -> None:
    console.print()
    # On a terminal a rule spans it; off one (unwrapped, 10,000 columns) it is FRAMED wide.
    width = None if console.is_terminal else FRAMED
    console.print(Rule(f"[bold]{number}  {escape(title)}[/]", align="left"), width=width)
