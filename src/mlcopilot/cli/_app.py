"""The ``mlcopilot`` command line: the apps, the options commands share, the one error handler.

Exit codes: 0 the command ran (no finding at or above ``--fail-on``), 1 a finding at or above
``--fail-on``, 2 bad usage or input, 3 the catalog cannot be reached, 4 an internal error,
5 the scan was saved but some notifications or write-backs are not delivered yet (they stay
in the outbox and are retried: ``mlcopilot outbox list``).

Each command module registers its commands on the apps here and imports what its command
needs inside the command: ``mlcopilot --help`` and ``mlcopilot checks`` must not pay for the
DataHub SDK, SQLAlchemy, MCP or the GitHub and Slack clients (``tests/test_startup.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, Protocol, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape

from mlcopilot import redact
from mlcopilot.cli.display import DISPLAY, UNWRAPPED, console
from mlcopilot.errors import MlCopilotError, UsageError

if TYPE_CHECKING:
    from mlcopilot.clock import Clock
    from mlcopilot.protocols import Catalog, StateStore
    from mlcopilot.settings import Settings

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

PROGRESS_EVERY = 15.0
"""Seconds between two progress lines off a terminal (a CI log shows work is going on)."""


def print_error(message: str) -> None:
    """Print ``message`` as one ``error:`` line on stderr (later lines, if any, indented).

    Redacted, and cleaned like everything the catalog wrote (an error may quote a name):
    no control, bidi or zero-width character reaches the terminal, no markup is interpreted.
    """
    from mlcopilot.text.safe import clean

    first, *rest = redact.redact(message).splitlines() or [""]
    err.print(f"[bold red]error:[/] {escape(clean(first, UNWRAPPED))}")
    for line in rest:
        err.print(f"  {escape(clean(line, UNWRAPPED))}")


def handle_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Print an expected error as one line on stderr and exit with its code."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except MlCopilotError as exc:
            print_error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception:  # a bug: say so, show where, and use an exit code of its own
            err.print(escape(redact.redact(traceback.format_exc())), end="")
            err.print("[bold red]internal error[/]: please report it with the traceback above")
            raise typer.Exit(4) from None

    return wrapper


class Commands(typer.Typer):
    """A typer app whose every command runs inside :func:`handle_errors`.

    The handler is applied where commands are registered, so no command can forget it. Help
    is click's plain text (no boxes that cut lines with "…" or hard-wrap a CI log), and
    ``-h`` is ``--help``.
    """

    def __init__(self, **options: Any) -> None:
        options.setdefault("rich_markup_mode", None)
        options.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
        super().__init__(**options)

    def command(  # the same call as typer's: keyword options are passed through
        self, name: str | None = None, **options: Any
    ) -> Callable[[F], F]:
        """A decorator that registers a function as the command ``name``, in the error handler."""
        register = super().command(name, **options)

        def decorator(function: F) -> F:
            return register(cast(F, handle_errors(function)))

        return decorator


app = Commands(
    name="mlcopilot",
    help="Watch what feeds your ML models in DataHub: schema drift, PII, stale and deprecated "
    "sources.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = Commands(
    help="Load the embedded DataHub Lite catalog and list the models a catalog holds.",
    no_args_is_help=True,
)
incidents_app = Commands(help="List, acknowledge and resolve incidents.", no_args_is_help=True)
baseline_app = Commands(help="Manage the schemas models were trained on.", no_args_is_help=True)
outbox_app = Commands(
    help="See and retry what mlcopilot sends to DataHub, GitHub and Slack.", no_args_is_help=True
)
datahub_app = Commands(help="Prepare a DataHub server for mlcopilot.", no_args_is_help=True)
config_app = Commands(help="See and start mlcopilot's configuration.", no_args_is_help=True)
notify_app = Commands(
    help="See who is told about a model's incidents, and why.", no_args_is_help=True
)
# The order here is the order `mlcopilot --help` lists the groups in.
app.add_typer(catalog_app, name="catalog")
app.add_typer(outbox_app, name="outbox")
app.add_typer(incidents_app, name="incidents")
app.add_typer(baseline_app, name="baseline")
app.add_typer(datahub_app, name="datahub")
app.add_typer(config_app, name="config")
app.add_typer(notify_app, name="notify")

out = console()
err = console(stderr=True)


class ListFormat(StrEnum):
    """Formats of the commands that list data (``incidents list``, ``outbox list``, ...)."""

    table = "table"
    json = "json"


CatalogOption = Annotated[
    str | None,
    typer.Option(
        "--catalog",
        metavar="SPEC",
        help="lite:PATH, datahub:[URL] (datahub: alone uses DATAHUB_GMS_URL or "
        "~/.datahubenv) or mcp:URL (default lite:$MLCOPILOT_HOME/catalog.db, or "
        "$MLCOPILOT_CATALOG).",
        show_default=False,
    ),
]
StateOption = Annotated[
    str | None,
    typer.Option(
        "--state-url",
        metavar="URL",
        help="SQLAlchemy URL of the state database (default $MLCOPILOT_STATE_URL, else "
        "sqlite:///$MLCOPILOT_HOME/state.db).",
        show_default=False,
    ),
]
NowOption = Annotated[
    str | None, typer.Option(help="The clock, ISO-8601 (default: now).", show_default=False)
]
"""``--now`` of the commands that scan (``scan``, ``impact``, ``report``)."""
MaxHopsOption = Annotated[int, typer.Option(help="Cap on lineage hops from each model.")]
"""``--max-hops`` of the commands that walk lineage (default 50: give it in the signature)."""
MaxNodesOption = Annotated[int, typer.Option(help="Cap on nodes walked per model.")]
"""``--max-nodes`` of the commands that walk lineage (default 10 000: in the signature)."""
OutputsOption = Annotated[
    list[Path] | None,
    typer.Option(
        help="Write the report to this file instead of stdout (- for stdout). With several "
        "--format, one --output each, in the same order.",
    ),
]
"""``--output`` paired with ``--format`` (``scan``, ``impact``): see ``paired_reports``."""
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="PATH",
        help="TOML configuration file (default $MLCOPILOT_CONFIG, else "
        "$MLCOPILOT_HOME/config.toml when present).",
        show_default=False,
    ),
]
FormatOption = Annotated[
    ListFormat, typer.Option("--format", help="table for people, json for scripts.")
]
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        metavar="PATH",
        help="Write it to this file instead of stdout ('-' is stdout). A table is written "
        "plain, unwrapped.",
        show_default=False,
    ),
]
LimitOption = Annotated[
    int, typer.Option("--limit", min=1, metavar="N", help="At most N rows, newest first.")
]


_config_file: list[Path | None] = [None]
"""``--config`` of this invocation (set by the callback, read by :func:`command_settings`)."""


def _print_version(value: bool) -> None:
    if value:
        from mlcopilot import __version__

        out.print(f"mlcopilot {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    config: ConfigOption = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Log what mlcopilot does (its INFO, all warnings) on stderr."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="Log everything (DEBUG, libraries' too) on stderr, with times."
        ),
    ] = False,
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file",
            metavar="PATH",
            help="Also append the log, at DEBUG, to this file (secrets redacted).",
            show_default=False,
        ),
    ] = None,
    full_names: Annotated[
        bool,
        typer.Option(
            "--full-names", help="Tables show full urns, never shortened, not short names."
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print mlcopilot's version and exit.",
        ),
    ] = False,
) -> None:
    """Options every command takes (the help text is the app's)."""
    # Read by each command, not here, so `config init` works even beside a broken file.
    _config_file[0] = config
    DISPLAY.full_names = full_names
    set_up_logging(
        level=logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING,
        log_file=log_file,
    )


QUIET_LOGGERS = ("mlcopilot.notify.relay", "mlcopilot.notify.acks")
"""Loggers whose every warning the command prints itself, from the report it gets back.

Shown on stderr only with ``--verbose`` or ``--debug`` (and always in ``--log-file``): else
each dead outbox row would be said twice, once as a log line and once in the report.
"""


LIBRARY_CHATTER = ("urllib3", "requests")
"""Loggers of HTTP libraries whose warnings are their own retries ("Retrying (...) after
connection broken by ...: /api/graphql"): mlcopilot says what failed once, in its own
``error:`` line, after the retries. Shown only with ``--verbose`` or ``--debug`` (and always in
``--log-file``), redacted like every record."""


class _LevelPrefix(logging.Formatter):
    """``warning: message``: a log line reads like the command's own warnings."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"{record.levelname.lower()}: {text}"


def set_up_logging(*, level: int, log_file: Path | None) -> None:
    """Log ``level`` and up on stderr, and everything to ``log_file`` (both redacted).

    Idempotent: the handlers this installed before are replaced (in-process tests run many
    commands in one interpreter).
    """
    redact.install()  # main() installs it too; a log file must never hold a secret
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_mlcopilot", False)]:
        root.removeHandler(handler)
        handler.close()
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(level)
    if level <= logging.DEBUG:
        stderr.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
    else:
        stderr.setFormatter(_LevelPrefix("%(message)s"))
    if level > logging.INFO:
        stderr.addFilter(
            lambda record: (
                not record.name.startswith(QUIET_LOGGERS)
                and record.name.partition(".")[0] not in LIBRARY_CHATTER
            )
        )
    elif level == logging.INFO:  # --verbose: what mlcopilot does, not every library's chatter
        stderr.addFilter(
            lambda record: record.levelno >= logging.WARNING or record.name.startswith("mlcopilot")
        )
    handlers: list[logging.Handler] = [stderr]
    if log_file is not None:
        try:
            to_file = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--log-file {log_file}: cannot write: {exc.strerror}") from None
        to_file.setLevel(logging.DEBUG)
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(to_file)
    for handler in handlers:
        handler._mlcopilot = True  # type: ignore[attr-defined]  # ours, to replace next time
        root.addHandler(handler)
    root.setLevel(min(h.level for h in handlers))


def command_settings(catalog: str | None = None, state_url: str | None = None) -> Settings:
    """The settings for this command: ``--config`` (or its defaults) and the flags given."""
    from mlcopilot.settings import load_settings  # pydantic-settings: only for commands that run

    return load_settings(_config_file[0], catalog=catalog, state_url=state_url)


@contextmanager
def opened(config: Settings, *, create: bool = False) -> Iterator[tuple[Catalog, StateStore]]:
    """The catalog and the state store ``config`` names, both closed on the way out.

    ``create``: the command records (``baseline accept``), so a missing state database is
    created; otherwise it is an error, never an empty estate.
    """
    from mlcopilot.scan.wiring import open_catalog, open_state

    cat = open_catalog(config.catalog_spec, config)
    try:
        store = open_state(config, create=create)
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


# --- data a command prints: to stdout or a file


def write_output(output: Path | None, text: str) -> None:
    """``text`` to stdout (``output`` None or ``-``), else to the file, whole or not at all."""
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        return
    write_atomically(output, text)
    err.print(f"Written to {escape(str(output))}.")


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a temp file renamed over it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
        ) as tmp:
            tmp.write(text)
        # The temp file is private (0600); a report is meant to be read, attached or served,
        # so it gets the mode any new file would: the umask's (or the file's it replaces).
        os.chmod(tmp.name, _mode_for(path))
        os.replace(tmp.name, path)
    except OSError as exc:
        raise UsageError(f"--output {path}: cannot write: {exc.strerror}") from exc


def _mode_for(path: Path) -> int:
    """The permissions ``path`` has, or a new file would get under the process's umask."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)  # reading the umask means setting it; put it straight back
        os.umask(umask)
        return 0o666 & ~umask


def rendered(draw: Callable[[Console], None]) -> str:
    """What ``draw`` prints, as plain unwrapped text (for ``--output`` of a table)."""
    import io

    buffer = io.StringIO()
    draw(Console(file=buffer, width=UNWRAPPED, soft_wrap=True, color_system=None))
    return buffer.getvalue()


# --- progress: on a terminal and, every PROGRESS_EVERY seconds, in a CI log


class Every:
    """True at most once per ``seconds`` (counted from construction): when to say it again."""

    def __init__(
        self, seconds: float = PROGRESS_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._seconds = seconds
        self._clock = clock
        self.started = self._last = clock()

    def due(self) -> bool:
        """Whether ``seconds`` have passed since the last time this said yes (or the start)."""
        now = self._clock()
        if now - self._last < self._seconds:
            return False
        self._last = now
        return True

    def elapsed(self) -> float:
        """Seconds since construction."""
        return self._clock() - self.started


class AnnouncedWaits:
    """A clock whose waits are said on stderr: the relay waiting for ``group_wait`` or a retry.

    Without it a scan that opens a notification group sits silent for ``group_wait``
    (30 s by default). A wait of a second or more is announced, and a long one is said again
    every :data:`PROGRESS_EVERY` seconds, so a CI log never looks hung.
    """

    def __init__(self, clock: Clock, console: Console) -> None:
        self._clock = clock
        self._console = console

    def now(self) -> datetime:
        """The wrapped clock's time."""
        return self._clock.now()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on the wrapped clock, saying so."""
        if seconds < 1:
            self._clock.sleep(seconds)
            return
        until = (self._clock.now() + timedelta(seconds=seconds)).strftime("%H:%M:%S UTC")
        self._console.print(
            f"outbox: waiting {seconds:.0f} s for rows due at {until} (notification grouping "
            "or a retry)",
            soft_wrap=True,
        )
        left = seconds
        while left > 0:
            step = min(left, PROGRESS_EVERY)
            self._clock.sleep(step)
            left -= step
            if left >= 1:
                self._console.print(f"outbox: still waiting, {left:.0f} s left", soft_wrap=True)


class _Failure(Protocol):
    """What typer's click raises for bad usage (typer >= 0.22 carries its own click copy)."""

    exit_code: int

    def format_message(self) -> str: ...

    def show(self) -> None: ...


def click_error_type() -> type[Exception]:
    """The ``ClickException`` class of whichever click typer parses with.

    Typer now carries its own copy of click, older ones use click itself; ``BadParameter``
    (exported by both) derives from it, so it is found the same way in either.
    """
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def print_usage_error(exc: Exception) -> int:
    """A bad command line as one ``error:`` line (with where to find help); its exit code."""
    failure = cast(_Failure, exc)
    if type(exc).__name__ == "NoArgsIsHelpError":  # `mlcopilot outbox`: the help, as click does
        failure.show()
        return failure.exit_code
    context = getattr(exc, "ctx", None)
    where = getattr(context, "command_path", "mlcopilot")
    print_error(f"{failure.format_message()} (see `{where} --help`)")
    return failure.exit_code
