"""``mlcopilot datahub setup`` and ``mlcopilot doctor``: prepare and check a DataHub server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from mlcopilot.cli._app import app, command_settings, datahub_app, out
from mlcopilot.errors import UsageError

if TYPE_CHECKING:
    from mlcopilot.settings import Settings

DataHubOption = Annotated[
    str,
    typer.Option(
        "--catalog",
        help="datahub:URL (or datahub: to use DATAHUB_GMS_URL / ~/.datahubenv); mcp:URL is "
        "checked through the same server.",
    ),
]


@datahub_app.command("setup")
def datahub_setup(
    catalog: DataHubOption = "datahub:",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what is missing.")] = False,
) -> None:
    """Create the tags and structured properties mlcopilot writes (idempotent)."""
    from mlcopilot.catalog.datahub.catalog import DataHubCatalog
    from mlcopilot.catalog.datahub.connection import settings_from_spec
    from mlcopilot.catalog.datahub.setup import setup_datahub

    location = _datahub_location(catalog)
    with DataHubCatalog.from_settings(settings_from_spec(location, command_settings())) as target:
        result = setup_datahub(target, dry_run=dry_run)
    verb = "would create" if dry_run else "created"
    out.print(
        f"{target.label}: {verb} {len(result.created)}, already there {len(result.existing)}."
    )
    for urn in result.created:
        out.print(f"  + {escape(urn)}")


@app.command("doctor")
def doctor_command(catalog: DataHubOption = "datahub:") -> None:
    """Check that a DataHub can be scanned and written back to, one line per check."""
    from mlcopilot.catalog.datahub.doctor import run_doctor

    kind = "mcp" if catalog.startswith("mcp:") else "datahub"
    config = command_settings()
    checks = run_doctor(f"{kind}:{_datahub_location(catalog)}", config=config)
    for check in checks:
        mark = (
            "[green]pass[/]"
            if check.ok
            else ("[red]FAIL[/]" if check.required else "[yellow]warn[/]")
        )
        out.print(f"{mark}  {escape(check.name)}: {escape(check.detail)}")
    out.print(f"[cyan]info[/]  {escape(_write_back_mode(config))}")
    notifications_ok, notifications = _notifications(config)
    mark = "[cyan]info[/]" if notifications_ok else "[red]FAIL[/]"
    out.print(f"{mark}  notifications: {escape(notifications)}")
    if not notifications_ok or any(not c.ok and c.required for c in checks):
        raise typer.Exit(1)


def _notifications(config: Settings) -> tuple[bool, str]:
    """Whether the GitHub and Slack settings would let a scan start, and where they send.

    A scan refuses a half-configured sink (a repository without a token, say); the doctor says
    so first, with the same message, instead of leaving it to the first scan.
    """
    from mlcopilot.errors import ConfigError
    from mlcopilot.notify.sinks.config import NotifySettings

    try:
        notify = NotifySettings.from_settings(config)
    except ConfigError as exc:
        return False, str(exc)
    where = []
    if notify.github is not None:
        where.append(f"GitHub issues in {notify.github.repo}")
    if notify.slack is not None:
        target = notify.slack.channel or "the webhook's channel"
        where.append(f"Slack ({notify.slack.mode}) to {target}")
    if not where:
        return True, "none configured (scans notify nobody; `mlcopilot demo` shows the previews)"
    return True, "; ".join(where)


def _write_back_mode(config: Settings) -> str:
    """Which write-back mode scans run in, and what set it."""
    source = config.source_of("datahub.write_back")
    if config.datahub.write_back:
        mode = "on: scans write tags, properties, incidents and documents to the catalog"
    else:
        mode = "off (shadow run): scans record incidents and notify, but write nothing to DataHub"
    return f"write-back: {mode} ({'default' if source == 'default' else 'set by ' + source})"


def _datahub_location(spec: str) -> str:
    kind, _, location = spec.partition(":")
    if kind not in {"datahub", "mcp"}:
        raise UsageError(f"--catalog {spec!r}: expected datahub:URL, datahub: or mcp:URL")
    return location
