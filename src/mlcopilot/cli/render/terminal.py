"""Readable terminal output (rich): scan results, write-back, notifications, incident lists.

Everything the catalog wrote (names, fields, messages, reasons) is shown through
:func:`plain`: the notification sinks' cleaner (no control, bidi or zero-width character, one
line) and, where rich parses markup, escaped. Tables are laid out here (:func:`print_rows`),
not by rich's table: an id is never wrapped, a name too long for the terminal is cut in the
middle (``legacy.cu…segments``) and never broken mid-word, and a row too wide for the
terminal moves its long text to an indented line below it. Off a terminal the console is
unwrapped (:mod:`mlcopilot.cli.display`), so every row is one whole line.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from mlcopilot.cli.display import DISPLAY, UNWRAPPED
from mlcopilot.incidents.payload import OutboxItem, OutboxStatus, PlannedRow, decode_notification
from mlcopilot.lineage.coverage import readiness_parts
from mlcopilot.model import (
    DocumentWrite,
    Incident,
    IncidentWrite,
    ModelReport,
    PropertyWrite,
    Severity,
    TagWrite,
    Write,
)
from mlcopilot.notify.content import headline
from mlcopilot.notify.relay import RelayReport
from mlcopilot.redact import redact
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import clean
from mlcopilot.text.wording import count

if TYPE_CHECKING:  # the scan module loads the store (SQLAlchemy): `mlcopilot checks` must not
    from mlcopilot.scan import ScanResult

SEVERITY_STYLE = {
    Severity.CRITICAL: "bold red",
    Severity.HIGH: "red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
}


def plain(text: str) -> str:
    """``text`` as the terminal may show it: one line, no control, bidi or zero-width character.

    The same cleaner the GitHub and Slack sinks use (:func:`mlcopilot.text.safe.clean`),
    without their length cap. Put through :func:`rich.markup.escape` where markup is parsed
    (:func:`safe`); :class:`rich.text.Text` parses none.
    """
    return clean(text, UNWRAPPED)


def safe(text: str) -> str:
    """:func:`plain`, with rich markup escaped: for strings that ``console.print`` parses."""
    return escape(plain(text))


def name(urn: str) -> str:
    """How a table names ``urn``: its short name, or the full urn with ``--full-names``."""
    return plain(urn if DISPLAY.full_names else short_name(urn))


# --- tables


@dataclass(frozen=True, slots=True)
class Column:
    """One column of :func:`print_rows`."""

    header: str
    cut: int | None = None
    """A name: when the row is too wide, cut in the middle down to this many characters."""
    detail: bool = False
    """When the row is too wide, shown on an indented line under it instead (wrapped at spaces)."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One value of a row: its text (shown as is, no markup) and a rich style."""

    text: str
    style: str = ""


_GAP = 2
_INDENT = 1
_DETAIL_INDENT = 4
ELLIPSIS = "…"


def print_rows(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], console: Console) -> None:
    """Print ``rows`` under a header, each row one line that fits the console.

    In order, until the row fits: every column on the line; name columns cut in the middle
    (the widest first, down to :attr:`Column.cut`); the detail columns moved to a line of their
    own under each row. If even that is too wide the line is printed whole, never cut, and the
    terminal wraps it: the leftmost columns (ids) stay intact.
    """
    if not rows:
        return
    natural = [
        max(cell_len(column.header), *(cell_len(row[i].text) for row in rows))
        for i, column in enumerate(columns)
    ]
    everything = list(range(len(columns)))
    shown = everything
    widths, fits = _fit(everything, natural, columns, console.width)
    if not fits:
        shown = [i for i in everything if not columns[i].detail]
        widths, _ = _fit(shown, natural, columns, console.width)
    below = [i for i in everything if i not in shown]
    header = [Cell(columns[i].header, "bold") for i in shown]
    console.print(_line(header, shown, widths, columns), soft_wrap=True)
    for row in rows:
        console.print(_line([row[i] for i in shown], shown, widths, columns), soft_wrap=True)
        details = [(columns[i].header, row[i].text) for i in below if row[i].text]
        if details:
            text = (
                details[0][1]
                if len(below) == 1
                else "  ".join(f"{head}: {value}" for head, value in details)
            )
            console.print(Padding(Text(text), (0, 0, 0, _DETAIL_INDENT), expand=False))


def _fit(
    shown: list[int], natural: list[int], columns: Sequence[Column], room: int
) -> tuple[dict[int, int], bool]:
    """Column widths for ``shown`` within ``room``, names cut as needed; and whether they fit."""
    widths = {i: natural[i] for i in shown}
    excess = _INDENT + sum(widths.values()) + _GAP * (len(shown) - 1) - room
    while excess > 0:
        cuttable = [i for i in shown if (c := columns[i].cut) is not None and widths[i] > c]
        if not cuttable:
            return widths, False
        widest = max(cuttable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths, True


def _line(
    cells: Sequence[Cell], shown: Sequence[int], widths: dict[int, int], columns: Sequence[Column]
) -> Text:
    line = Text(" " * _INDENT)
    for position, (i, cell) in enumerate(zip(shown, cells, strict=True)):
        value = cell.text
        if columns[i].cut is not None:
            value = middle_cut(value, widths[i])
        if position < len(shown) - 1:  # no trailing spaces after the last column
            value += " " * (widths[i] - cell_len(value) + _GAP)
        line.append(value, style=cell.style or None)
    line.rstrip()  # an empty last cell leaves the padding of the one before
    return line


def middle_cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, cut in the middle: ``legacy.cu…segments``.

    Both ends of a name tell it apart (its schema, its last word), so both are kept.
    """
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = width // 2
    tail = width - 1 - head
    cut = text[:head] + ELLIPSIS + (text[-tail:] if tail else "")
    while cell_len(cut) > width and head > 0:  # wide characters: trim until it fits
        head -= 1
        cut = text[:head] + ELLIPSIS + (text[-tail:] if tail else "")
    return cut


# --- scan


def print_scan(result: ScanResult, console: Console, *, previewed: Collection[str] = ()) -> None:
    """Render a scan result as readable tables (``previewed`` sinks only showed, not sent)."""
    for note in result.notes:
        console.print(safe(note))
    if not result.models:
        return  # the note says it all: nothing was walked, reconciled or written
    changes = result.changes
    incidents = {i.id: (i, True) for i in changes.opened}
    incidents.update((i.id, (i, False)) for i in changes.updated)
    for report in result.models:
        _print_model(report, console, incidents)
    console.print()
    opened = "would open" if result.dry_run else "opened"
    resolved = "would resolve" if result.dry_run else "resolved"
    console.print(
        f"Incidents: [bold]{len(changes.opened)}[/] {opened}, {len(changes.updated)} still "
        f"open, [green]{len(changes.resolved)}[/] {resolved}."
    )
    console.print(safe(result.summary.sentence()))
    if result.write_back:
        print_writes(result.writes, console, dry_run=result.dry_run)
    else:  # a shadow run: "already up to date" would claim the catalog holds the findings
        console.print("Write-back: off (shadow run); nothing written to the catalog.")
    print_notifications(result.notifications, console, dry_run=result.dry_run)
    for incident_id, who in sorted(result.acks.acknowledged.items()):
        console.print(f"Acknowledged {incident_id} ({safe(who)}).")
    for warning in result.acks.warnings:
        console.print(f"[yellow]warning:[/] {safe(redact(warning))}")
    if result.relay is not None:
        print_relay(result.relay, console, previewed=previewed)


FINDING_COLUMNS = (
    Column("incident"),
    Column("state"),
    Column("severity"),
    Column("check"),
    Column("entity", cut=12),
    Column("field", cut=8),
    Column("finding", detail=True),
)
"""The scan table: the incident id first (to copy into ``incidents ack``), the message last."""


def _print_model(
    report: ModelReport, console: Console, incidents: dict[str, tuple[Incident, bool]]
) -> None:
    lineage = report.lineage
    console.print()
    console.print(f"[bold]{safe(short_name(report.urn))}[/]  [dim]{safe(report.urn)}[/]")
    coverage = f"  walked {count(len(lineage.nodes), 'node')}"
    if lineage.truncated:
        coverage += " [bold yellow](truncated: a hop or node cap was reached)[/]"
    if report.unknown:
        coverage += f", {count(len(report.unknown), 'entity')} lacked metadata a check needed"
    if report.gaps:
        coverage += f", [yellow]{count(len(report.gaps), 'coverage gap')}[/]"
    console.print(coverage)
    if report.findings:
        columns = list(FINDING_COLUMNS)
        if DISPLAY.full_names:  # a full urn is never cut: under the row when it does not fit
            columns[4] = Column("entity", detail=True)
        rows = []
        for f in report.findings:
            incident, new = incidents.get(f.id, (None, False))
            state = "new" if new else incident.state.value if incident is not None else ""
            rows.append(
                [
                    Cell(incident.id if incident is not None else ""),
                    Cell(state, "bold" if new else ""),
                    Cell(f.severity.value, SEVERITY_STYLE[f.severity]),
                    Cell(plain(f.check)),
                    Cell(name(f.entity)),
                    Cell(plain(f.field or "")),
                    Cell(plain(f.message)),
                ]
            )
        print_rows(columns, rows, console)
    elif report.gaps:
        console.print("  [yellow]no findings, but coverage is incomplete: see the gaps below[/]")
    else:
        console.print("  [green]no findings[/]")
    for gap in report.gaps:
        console.print(f"  [yellow]gap:[/] {safe(name(gap.entity))}: {safe(gap.reason)}")
    for urn, reasons in sorted(report.unknown.items()):
        console.print(f"  [dim]unknown: {safe(name(urn))}: {safe('; '.join(reasons))}[/]")
    if report.profiles is not None and report.profiles.datasets:
        headline, todo = readiness_parts(report.profiles, name)
        console.print(f"  [dim]profiles: {safe(headline)}[/]")
        for line in todo:
            console.print(f"  [dim]  {safe(line)}[/]")


def print_notifications(rows: Sequence[PlannedRow], console: Console, *, dry_run: bool) -> None:
    """Say which GitHub/Slack notifications the scan committed (or would commit)."""
    notify = [r for r in rows if r.sink != "datahub"]
    if not notify:
        return
    verb = "would send" if dry_run else "queued"
    console.print(f"Notifications {verb}:")
    # One line per group and transition, with every target it goes to (routing).
    lines: dict[tuple[str, int, str], tuple[str, list[str]]] = {}
    for row in notify:
        key = (row.group_key, row.group_generation, row.action)
        if key not in lines:
            lines[key] = (headline(decode_notification(row.payload)), [])
        lines[key][1].append(row.sink)
    for (_, _, action), (text, targets) in lines.items():
        console.print(f"  - {action}: {safe(text)} → {safe(', '.join(targets))}")


def print_relay(report: RelayReport, console: Console, *, previewed: Collection[str] = ()) -> None:
    """Say what the relay delivered, retries (and when), leaves to another process, and lost.

    What it will retry comes with when; rows another process still running on this host is
    delivering are said as such; then what is dead.

    Dead rows that died of the same error are said once, with every row's id to retry: six
    rows refused for one bad token are one line, not six.
    """
    for label, sinks_shown in (("Delivered", False), ("Previewed, not sent", True)):
        items = [
            i
            for i in report.delivered
            if i.sink != "datahub" and (i.sink in previewed) == sinks_shown
        ]
        counts: dict[str, int] = {}
        for item in items:
            counts[f"{item.sink} {item.action}"] = counts.get(f"{item.sink} {item.action}", 0) + 1
        if counts:
            done = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
            console.print(f"{label}: {done}.")
    duplicates = {warning for _item, warning in report.possible_duplicates}
    for warning in report.warnings:
        if warning not in duplicates:
            console.print(f"[yellow]warning:[/] {safe(redact(warning))}")
    for item, warning in report.possible_duplicates:
        console.print(
            f"[bold yellow]possible duplicate[/] (outbox row {item.id}, {item.sink} "
            f"{item.action}): {safe(redact(warning))}"
        )
    for item, error in report.retrying:
        when = report.next_attempts.get(item.id)
        later = f"next attempt at {_time(when)}" if when is not None else "it will be retried"
        console.print(
            f"[yellow]not delivered yet[/] (outbox row {item.id}, {item.sink} {item.action}): "
            f"{safe(redact(error))} — {later}"
        )
    for item, held in report.elsewhere:
        console.print(
            f"being delivered elsewhere (outbox row {item.id}, {item.sink} {item.action}): "
            f"{safe(redact(held))}"
        )
    if report.stopped is not None:
        console.print(f"[yellow]stopped:[/] {safe(report.stopped)}")
    for error, dead in _by_error(report.dead):
        ids = " ".join(str(item.id) for item in dead)
        if len(dead) == 1:
            what = f"outbox row {ids}, {dead[0].sink} {dead[0].action}"
        else:
            kinds: dict[str, int] = {}
            for item in dead:
                kinds[f"{item.sink} {item.action}"] = kinds.get(f"{item.sink} {item.action}", 0) + 1
            shown = ", ".join(f"{what} ×{n}" if n > 1 else what for what, n in kinds.items())
            what = f"{len(dead)} outbox rows: {shown}"
        console.print(
            f"[bold red]dead[/] ({what}): {safe(redact(error))} — fix the cause, then "
            f"`mlcopilot outbox retry {ids}`"
        )


def _by_error(dead: Sequence[tuple[OutboxItem, str]]) -> list[tuple[str, list[OutboxItem]]]:
    """Dead rows grouped by their error, in the order each error first appears."""
    groups: dict[str, list[OutboxItem]] = {}
    for item, error in dead:
        groups.setdefault(error, []).append(item)
    return list(groups.items())


OUTBOX_COLUMNS = (
    Column("id"),
    Column("sink"),
    Column("action"),
    Column("status"),
    Column("attempts"),
    Column("group", cut=12),
    Column("next attempt"),
    Column("why", detail=True),
)


def print_outbox(items: Sequence[OutboxItem], console: Console) -> None:
    """Render outbox rows as a table: when each goes out next, and why it has not yet."""
    rows = []
    for item in items:
        status = item.status.value + (" ⚠" if item.warning or item.uncertain else "")
        rows.append(
            [
                Cell(str(item.id)),
                Cell(item.sink),
                Cell(
                    f"{item.action} {item.seq}"
                    if item.action in ("update", "reminder")
                    else item.action
                ),
                Cell(status),
                Cell(str(item.attempts)),
                Cell(plain(f"{item.group_key}/{item.group_generation}")),
                Cell(_next_attempt(item)),
                Cell(plain(redact(_why(item)))),
            ]
        )
    print_rows(OUTBOX_COLUMNS, rows, console)


def _next_attempt(item: OutboxItem) -> str:
    if item.status is OutboxStatus.PENDING:
        return _time(max(item.not_before, item.next_attempt_at))
    if item.status is OutboxStatus.SENDING and item.lease_expires_at is not None:
        return _time(item.lease_expires_at)  # if its relay died, the row is claimed then
    if item.status is OutboxStatus.DEAD:
        return "after `outbox retry`"
    return ""


def _why(item: OutboxItem) -> str:
    # A rate-limited row's error starts "rate limited until …" (the relay writes it so).
    if item.status is OutboxStatus.SENDING and item.lease_expires_at is not None:
        owner = item.lease_owner or "another process"
        return (
            f"being sent by {owner} (lease until {_time(item.lease_expires_at)}; if that "
            "process died, the row goes out then)"
        )
    return item.last_error or item.warning or ""


def _time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def print_writes(writes: Sequence[Write], console: Console, *, dry_run: bool) -> None:
    """Say what the write-back wrote (or, in a dry run, would write) to the catalog."""
    verb = "would write" if dry_run else "wrote"
    if not writes:
        console.print(f"Write-back: catalog already up to date ({verb} nothing).")
        return
    console.print(f"Write-back {verb} {count(len(writes), 'change')} to the catalog:")
    for write in writes:
        console.print(f"  - {safe(describe_write(write))}")


def describe_write(write: Write) -> str:
    """One line describing a write-back intent."""
    if isinstance(write, TagWrite):
        action = "add tag" if write.present else "remove tag"
        return f"{action} {short_name(write.tag)} on {short_name(write.entity)}"
    if isinstance(write, PropertyWrite):
        values = ", ".join(str(v) for v in write.values)
        return f"set {short_name(write.property)} on {short_name(write.entity)} = [{values}]"
    if isinstance(write, IncidentWrite):
        state = "ACTIVE" if write.active else "RESOLVED"
        return f"incident {write.urn} ({state}, {write.incident_type})"
    assert isinstance(write, DocumentWrite)
    return f"document {write.urn} ({write.title})"


# --- incidents


INCIDENT_COLUMNS = (
    Column("id"),
    Column("state"),
    Column("severity"),
    Column("check"),
    Column("model", cut=10, detail=True),
    Column("entity", cut=12, detail=True),
    Column("field", cut=8, detail=True),
    Column("opened"),
    Column("told", cut=10, detail=True),
)
"""``incidents list``: on a narrow terminal the names go under each row, the id stays whole."""


def print_incidents(
    incidents: Sequence[Incident],
    console: Console,
    targets: Mapping[tuple[str, int], Sequence[str]] | None = None,
) -> None:
    """Render incidents as a table; ``told``: where each one's notifications go (routing)."""
    targets = targets or {}
    columns: Sequence[Column] = INCIDENT_COLUMNS
    if DISPLAY.full_names:  # full urns are never cut
        columns = tuple(Column(c.header, detail=c.detail) for c in INCIDENT_COLUMNS)
    rows = [
        [
            Cell(i.id),
            Cell(i.state.value),
            Cell(i.severity.value, SEVERITY_STYLE[i.severity]),
            Cell(plain(i.check)),
            Cell(name(i.model)),
            Cell(name(i.entity)),
            Cell(plain(i.field or "")),
            Cell(i.opened_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")),
            Cell(plain(", ".join(targets.get((i.id, i.generation), ())))),
        ]
        for i in incidents
    ]
    print_rows(columns, rows, console)


# --- models and checks


MODEL_COLUMNS = (
    Column("name"),
    Column("platform"),
    Column("env"),
    Column("upstream"),
    Column("urn", detail=True),
)
"""``catalog models``: the name ``scan --model`` accepts, and the urn it stands for."""


def print_models(models: Sequence[tuple[str, str, str, str, int]], console: Console) -> None:
    """Render ``(urn, name, platform, env, upstream count)`` rows, one model each."""
    rows = [
        [Cell(plain(n)), Cell(plain(platform)), Cell(plain(env)), Cell(str(up)), Cell(plain(urn))]
        for urn, n, platform, env, up in models
    ]
    print_rows(MODEL_COLUMNS, rows, console)


def print_doc(text: str, console: Console) -> None:
    """A check's documentation: reflowed to a terminal's width, as written anywhere else.

    The text is already wrapped (near 90 columns); wrapping it again at a narrower terminal
    leaves ragged half-lines. On a terminal each paragraph and list item is joined and
    wrapped once, at the terminal's width; off one it is printed as written.
    """
    if not console.is_terminal:
        for line in text.splitlines():
            indent = line[: len(line) - len(line.lstrip(" "))]
            console.print(Text(indent + plain(line) if line.strip() else ""), soft_wrap=True)
        return
    for index, paragraph in enumerate(_paragraphs(text)):
        if index:
            console.print()
        for bullet, block in paragraph:
            if not bullet:
                console.print(Text(block))
                continue
            grid = Table.grid()
            grid.add_column(no_wrap=True)
            grid.add_column()
            grid.add_row("- ", Text(block))
            console.print(grid)


def _paragraphs(text: str) -> list[list[tuple[bool, str]]]:
    """Paragraphs (blank-line separated) as blocks: (is a list item, its joined text)."""
    paragraphs: list[list[tuple[bool, str]]] = []
    blocks: list[tuple[bool, list[str]]] = []
    for raw in [*text.splitlines(), ""]:
        line = plain(raw)
        if not line:
            if blocks:
                paragraphs.append([(bullet, " ".join(words)) for bullet, words in blocks])
            blocks = []
        elif line.startswith("- "):
            blocks.append((True, [line[2:]]))
        elif blocks and (raw.startswith("  ") or not blocks[-1][0]):
            blocks[-1][1].append(line)  # a list item's continuation, or the paragraph's
        else:
            blocks.append((False, [line]))
    return paragraphs
