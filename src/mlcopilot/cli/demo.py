"""``mlcopilot demo``: the whole loop on a fresh embedded catalog (the story is in demo_run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlcopilot.cli._app import app, command_settings, out


@app.command("demo")
def demo_command(
    home: Annotated[
        Path | None,
        typer.Option(help="Where the demo catalog and state go (default $MLCOPILOT_HOME/demo)."),
    ] = None,
) -> None:
    """Run the end-to-end demo on a fresh embedded DataHub catalog (no server needed)."""
    from mlcopilot.cli.demo_run import run_demo
    from mlcopilot.notify.sinks.config import NotifySettings

    settings = command_settings()
    run_demo(
        home or settings.home_path / "demo", out, notify=NotifySettings.from_settings(settings)
    )
