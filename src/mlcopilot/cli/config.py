"""``mlcopilot config show|init``: the effective configuration, and a file to start from."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mlcopilot.cli._app import CatalogOption, StateOption, command_settings, config_app, err
from mlcopilot.errors import UsageError

if TYPE_CHECKING:
    from pydantic import BaseModel


class ConfigFormat(StrEnum):
    """Formats of ``config show``."""

    text = "text"
    json = "json"


@config_app.command("show")
def config_show(
    output_format: Annotated[ConfigFormat, typer.Option("--format")] = ConfigFormat.text,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Print every effective setting, its value and its source (secrets redacted)."""
    from mlcopilot.settings.doc import effective_rows, render_json, render_text

    rows = effective_rows(command_settings(catalog, state_url), _check_models())
    render = render_json if output_format is ConfigFormat.json else render_text
    sys.stdout.write(render(rows))


@config_app.command("init")
def config_init(
    path: Annotated[
        Path | None,
        typer.Argument(help="Where to write it (default: print it). Never overwritten."),
    ] = None,
) -> None:
    """Write a commented starting configuration file (every key at its default)."""
    from mlcopilot.settings.doc import starting_file

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
