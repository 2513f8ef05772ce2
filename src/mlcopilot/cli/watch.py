"""``mlcopilot watch``: follow DataHub's change events and rescan the models they affect.

It runs a DataHub Actions pipeline in this process (the ``mlcopilot`` action on DataHub's
Kafka topics, :mod:`mlcopilot.watch`); the action records a rescan request per affected model
in the state database and a worker thread scans them. On start every watched model is scanned
once; then events are followed from the consumer group's committed offsets. SIGTERM or Ctrl-C
stops it cleanly (exit 0): requests not scanned yet stay in the database for the next watcher.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mlcopilot.cli._app import CatalogOption, StateOption, app, command_settings, err
from mlcopilot.errors import UsageError

INSTALL_HINT = "pip install 'ml-incident-copilot[watch]'"


@app.command("watch")
def watch_command(
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print the DataHub Actions pipeline YAML (for `datahub actions -c`) and exit.",
        ),
    ] = False,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Watch only this model urn (repeatable; default: all)."),
    ] = None,
    rescan_interval: Annotated[
        str | None,
        typer.Option(
            "--rescan-interval",
            help='Full rescan period for what only time changes, e.g. 1h; "off" for none '
            "(default: [watch] rescan_interval, 1h).",
            show_default=False,
        ),
    ] = None,
    lease: Annotated[
        str | None,
        typer.Option(
            "--lease",
            help="How long a claimed rescan outlives this watcher if it dies, e.g. 1m; renewed "
            "while it scans (default: 15m).",
            show_default=False,
        ),
    ] = None,
    connect_timeout: Annotated[
        str | None,
        typer.Option(
            "--connect-timeout",
            help="How long to wait at start for Kafka and the schema registry to answer, "
            "e.g. 2m (default: 30s); then exit 3.",
            show_default=False,
        ),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Follow DataHub's change events (Kafka) and rescan the models each change affects."""
    try:
        from mlcopilot.watch import run
    except ImportError as exc:
        if not (exc.name or "").startswith(("datahub_actions", "confluent_kafka")):
            raise
        raise UsageError(
            f"`mlcopilot watch` needs DataHub Actions, which is not installed: {INSTALL_HINT}"
        ) from None
    from mlcopilot.settings import parse_duration

    interval = None
    if rescan_interval is not None:
        off = rescan_interval.strip().lower() in ("off", "never", "none")
        interval = None if off else parse_duration(rescan_interval, "--rescan-interval")
        if interval is not None and interval.total_seconds() <= 0:
            raise UsageError(f"--rescan-interval {rescan_interval}: must be more than 0")
    held = None
    if lease is not None:
        held = parse_duration(lease, "--lease")
        if held.total_seconds() <= 0:
            raise UsageError(f"--lease {lease}: must be more than 0")
    wait = None
    if connect_timeout is not None:
        wait = parse_duration(connect_timeout, "--connect-timeout").total_seconds()
        if wait <= 0:
            raise UsageError(f"--connect-timeout {connect_timeout}: must be more than 0")
    settings = command_settings(catalog, state_url)
    config = run.config_for(
        settings,
        models=tuple(model or ()),
        rescan_interval=interval,
        rescan_given=rescan_interval is not None,
        for_display=print_config,
        lease=held,
    )
    if print_config:
        from mlcopilot.watch.pipeline import render_yaml

        sys.stdout.write(render_yaml(config))
        return
    say = lambda line: err.print(line, markup=False, highlight=False)  # noqa: E731
    if wait is None:
        run.watch(config, settings, say=say)
    else:
        run.watch(config, settings, say=say, connect_wait=wait)
