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
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape

from mlcopilot import redact
from mlcopilot.errors import MlCopilotError, UsageError

if TYPE_CHECKING:
    from mlcopilot.protocols import Catalog, StateStore
    from mlcopilot.settings import Settings

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


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


class Commands(typer.Typer):
    """A typer app whose every command runs inside :func:`handle_errors`.

    The handler is applied where commands are registered, so no command can forget it.
    """

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
catalog_app = Commands(help="Manage the embedded DataHub Lite catalog.", no_args_is_help=True)
incidents_app = Commands(help="List, acknowledge and resolve incidents.", no_args_is_help=True)
baseline_app = Commands(help="Manage the schemas models were trained on.", no_args_is_help=True)
outbox_app = Commands(
    help="See and retry what mlcopilot sends to DataHub, GitHub and Slack.", no_args_is_help=True
)
datahub_app = Commands(help="Prepare a DataHub server for mlcopilot.", no_args_is_help=True)
config_app = Commands(help="See and start mlcopilot's configuration.", no_args_is_help=True)
# The order here is the order `mlcopilot --help` lists the groups in.
app.add_typer(catalog_app, name="catalog")
app.add_typer(outbox_app, name="outbox")
app.add_typer(incidents_app, name="incidents")
app.add_typer(baseline_app, name="baseline")
app.add_typer(datahub_app, name="datahub")
app.add_typer(config_app, name="config")

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


class ListFormat(StrEnum):
    """Formats of ``incidents list`` and ``outbox list``."""

    table = "table"
    json = "json"


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
"""``--config`` of this invocation (set by the callback, read by :func:`command_settings`)."""


@app.callback()
def main_options(config: ConfigOption = None) -> None:
    """Options every command takes (the help text is the app's)."""
    # Read by each command, not here, so `config init` works even beside a broken file.
    _config_file[0] = config


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
    from mlcopilot.wiring import open_catalog, open_state

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
