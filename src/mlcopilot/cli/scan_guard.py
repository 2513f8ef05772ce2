"""What ``mlcopilot scan`` checks before it reads or records anything: flags, clock, output.

A scan commits its incidents, then writes back and notifies; whatever can fail locally must
fail before that, or the report is lost while the next scan says nothing is new.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Final

from rich.markup import escape

from mlcopilot.cli._app import err, parse_now
from mlcopilot.errors import UsageError

if TYPE_CHECKING:
    from mlcopilot.protocols import Catalog, StateStore, WalkLimits
    from mlcopilot.settings import Settings

EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest ``--now``: DataHub's timestamps count milliseconds from here."""
LATEST: Final = datetime(9000, 1, 1, tzinfo=UTC)
"""The first ``--now`` refused: intervals, countdowns and reminders are added to the clock,
and must stay well inside what a datetime can hold (year 9999)."""


def scan_clock(value: str | None) -> datetime:
    """``--now``, refused when the scan's own arithmetic could not work with it."""
    now = parse_now(value)
    if not EARLIEST <= now < LATEST:
        raise UsageError(
            f"--now {value}: out of range; it must be from {EARLIEST:%Y-%m-%d} up to "
            f"{LATEST:%Y-%m-%d} (exclusive)"
        )
    return now


def walk_limits(max_hops: int, max_nodes: int) -> WalkLimits:
    """``--max-hops`` and ``--max-nodes``; below 1 nothing upstream would be checked at all."""
    from mlcopilot.protocols import WalkLimits

    for flag, value, why in (
        ("--max-hops", max_hops, "0 hops reach nothing upstream of the model"),
        ("--max-nodes", max_nodes, "the model itself is the first node walked"),
    ):
        if value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1 ({why})")
    return WalkLimits(max_hops=max_hops, max_nodes=max_nodes)


def report_path(output: Path | None) -> Path | None:
    """``--output``: None for stdout (no flag, or ``-``); else a file that can be written now.

    The folder is created if missing and tried with a temporary file, which is removed.

    Raises:
        UsageError: the path is a folder, or the file cannot be created there.
    """
    if output is None or str(output) == "-":
        return None
    if output.is_dir():
        raise UsageError(f"--output {output}: is a folder; name a file (or - for stdout)")
    folder = output.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=f".{output.name}.", suffix=".check")
    except OSError as exc:
        raise UsageError(
            f"--output {output}: cannot write in {folder}: {exc.strerror}; nothing was scanned"
        ) from exc
    os.close(handle)
    Path(probe).unlink(missing_ok=True)
    return output


@contextmanager
def opened_for_scan(settings: Settings, *, dry_run: bool) -> Iterator[tuple[Catalog, StateStore]]:
    """The catalog, then the state store (created if missing; read-only for a dry run).

    The catalog is opened first: a scan of a missing catalog creates no state (and no home).
    """
    from mlcopilot.scan.wiring import open_catalog, open_state

    cat = open_catalog(settings.catalog_spec, settings)
    try:
        store = open_state(settings, create=not dry_run, dry_run=dry_run)
        try:
            yield cat, store
        finally:
            store.close()
    finally:
        cat.close()


class OutputFormat(StrEnum):
    """Report formats of ``scan`` (``impact`` offers all but html)."""

    table = "table"
    json = "json"
    markdown = "markdown"
    junit = "junit"
    sarif = "sarif"
    github = "github"
    html = "html"


def paired_reports(
    formats: Sequence[OutputFormat], outputs: Sequence[Path]
) -> list[tuple[OutputFormat, Path | None]]:
    """Each report asked for and where it goes (None: stdout), checked before the scan.

    One ``--format`` takes at most one ``--output``; several pair up in order, and at most one
    of them may go to stdout. A table bound for a file is written as markdown.
    """
    if (len(formats) > 1 or len(outputs) > 1) and len(formats) != len(outputs):
        raise UsageError(
            f"{len(formats)} --format and {len(outputs)} --output: "
            "with several, give them in pairs (--format json --output r.json --format "
            "sarif --output r.sarif; - for stdout)"
        )
    paths = [report_path(path) for path in outputs] or [None]
    if sum(path is None for path in paths) > 1:
        raise UsageError("only one report can go to stdout: give the others an --output file")
    reports: list[tuple[OutputFormat, Path | None]] = []
    for each_format, path in zip(formats, paths, strict=True):
        if path is not None and each_format is OutputFormat.table:
            err.print(
                f"The report goes to {escape(str(path))} as markdown (tables are for terminals)."
            )
            each_format = OutputFormat.markdown
        reports.append((each_format, path))
    return reports
