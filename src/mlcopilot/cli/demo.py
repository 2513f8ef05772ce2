"""``mlcopilot demo``: the whole loop on a fresh embedded catalog (the story is in demo_run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlcopilot.cli._app import app, command_settings, err, out


@app.command("demo")
def demo_command(
    home: Annotated[
        Path | None,
        typer.Option(
            help="Where the demo's catalog and state go (default: a new temporary folder, "
            "printed). An existing folder must be empty or an earlier demo's.",
            show_default=False,
        ),
    ] = None,
    send: Annotated[
        bool,
        typer.Option(
            "--send",
            help="Really send where a sink's credentials are set: GitHub, Slack, PagerDuty, "
            "Teams, the signed webhook, sink plugins (default: show and save what would be "
            "sent, and send nothing).",
        ),
    ] = False,
) -> None:
    """Run the end-to-end demo on a fresh embedded DataHub catalog (no server needed)."""
    from mlcopilot.cli.demo_run import prepare_home, run_demo
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.notify.sinks.preview import PreviewTargets

    settings = command_settings()
    notify = NotifySettings.from_settings(settings)
    # What is not sent is previewed as the configured sinks would send it (repository, label,
    # channel, PagerDuty's min_severity), or to placeholders; never with a secret.
    targets = PreviewTargets.from_settings(settings, notify)
    if not send:
        configured = notify.sinks
        notify = notify.writeback_only()  # every sink off, plugins too: nothing is sent
        if configured:
            named = ", ".join(configured[:-1]) + " and " if len(configured) > 1 else ""
            err.print(
                f"{named}{configured[-1]} credentials are set, but the demo sends nothing "
                "without --send: it shows what would be sent."
            )
    run_demo(prepare_home(home, out), out, notify, targets)
