"""``mlcopilot notify routes``: where a model's incidents go, and which rule or owner chose it."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from mlcopilot.cli._app import (
    CatalogOption,
    FormatOption,
    ListFormat,
    OutputOption,
    command_settings,
    notify_app,
    out,
    rendered,
    write_output,
)
from mlcopilot.model import Severity


@notify_app.command("routes")
def notify_routes(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            metavar="NAME|URN",
            help="The model: its name (as `catalog models` lists it) or its urn.",
            show_default=False,
        ),
    ],
    check: Annotated[
        str,
        typer.Option(metavar="NAME", help="An incident of this check (rules may name checks)."),
    ] = "schema_drift",
    severity: Annotated[
        Severity,
        typer.Option(help="An incident this severe (rules and PagerDuty compare severities)."),
    ] = Severity.HIGH,
    entity: Annotated[
        str | None,
        typer.Option(
            metavar="URN",
            help="The affected upstream entity (its owners count with notify.owners = "
            '["model", "entity"]).',
            show_default=False,
        ),
    ] = None,
    catalog: CatalogOption = None,
    output_format: FormatOption = ListFormat.table,
    output: OutputOption = None,
) -> None:
    """Explain where an incident of a model goes, and why.

    Each sink's target (a rule of notify.routes, an owner in DataHub, the default), the
    owners DataHub records and how they are reached.
    """
    from mlcopilot.notify.routing import Router
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.scan.routes import router, subject_of
    from mlcopilot.scan.selection import models_to_scan
    from mlcopilot.scan.wiring import open_catalog

    settings = command_settings(catalog=catalog)
    notify = NotifySettings.from_settings(settings)
    cat = open_catalog(settings.catalog_spec, settings)
    try:
        (urn,) = models_to_scan(cat, [model])
        nodes = cat.nodes([urn, *([entity] if entity else [])])
        about = subject_of(check, severity, nodes[urn], nodes.get(entity) if entity else None)
        routing: Router = router(cat, notify, [about])
    finally:
        cat.close()
    routes = routing.routes(about)
    chosen = routing.rule_for(about)
    owners = [
        {
            "urn": owner,
            "kind": contact.kind if contact else None,
            "name": contact.name if contact else None,
            "slack": contact.slack if contact else None,
            "email": contact.email if contact else None,
        }
        for owner in routing.owners(about)
        for contact in [routing.contacts.get(owner)]
    ]
    explained: dict[str, Any] = {
        "model": urn,
        "check": check,
        "severity": severity.value,
        "domains": list(about.domains),
        "platform": about.platform,
        "owners_recorded": about.model_owners is not None,
        "rule": chosen[0] + 1 if chosen else None,
        "owners": owners,
        "routes": [
            {
                "target": r.target,
                "why": r.why,
                "labels": list(r.labels),
                "mentions": [{"name": m.name, "member_id": m.member_id} for m in r.mentions],
            }
            for r in routes
        ],
    }
    if output_format is ListFormat.json:
        write_output(output, json.dumps(explained, indent=2, ensure_ascii=False) + "\n")
        return
    lines = _lines(explained, notify.sinks)

    def show(console: Console) -> None:
        for line in lines:
            console.print(line, highlight=False)

    if output is None:
        show(out)
    else:
        write_output(output, rendered(show))


def _lines(explained: dict[str, Any], sinks: tuple[str, ...]) -> list[str]:
    """The explanation for a terminal (catalog text escaped for rich's markup)."""
    lines = [
        f"An incident of {escape(str(explained['check']))} ({explained['severity']}) on "
        f"{escape(str(explained['model']))}:"
    ]
    if not sinks:
        lines.append("  no sink is configured: nobody is told (see README, Notifications)")
    routes = explained["routes"]
    if sinks and not routes:
        lines.append("  goes nowhere: the matching rule turns every sink off")
    for route in routes:
        extra = ""
        if route["labels"]:
            extra += f"; labels {', '.join(escape(x) for x in route['labels'])}"
        if route["mentions"]:
            names = ", ".join(
                escape(m["name"]) + (f" (<@{m['member_id']}>)" if m["member_id"] else "")
                for m in route["mentions"]
            )
            extra += f"; mentions {names}"
        lines.append(f"  → {escape(route['target'])}: {escape(route['why'])}{extra}")
    owners = explained["owners"]
    if not explained["owners_recorded"]:
        lines.append("Owners: DataHub records no ownership for this model.")
    elif not owners:
        lines.append("Owners: none listed in DataHub's ownership aspect.")
    else:
        lines.append("Owners in DataHub:")
        for owner in owners:
            if owner["kind"] is None:
                lines.append(f"  {escape(owner['urn'])}: no user or group entity in the catalog")
                continue
            reach = owner["slack"] or "no Slack set"
            lines.append(
                f"  {escape(owner['urn'])} ({owner['kind']} {escape(owner['name'])}): "
                f"{escape(reach)}"
            )
    return lines
