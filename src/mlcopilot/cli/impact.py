"""``mlcopilot impact``: what a change to a dataset would break, before it lands.

The preview runs the scan's own engine twice in dry run (the catalog as it is, and as it
would be after the change) and reports the incidents the change would open, per model
downstream. It writes nothing: the state database is opened read-only, the catalog never
written. Reports as ``scan`` writes them: ``--format``/``--output`` in pairs.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mlcopilot.cli._app import (
    CatalogOption,
    MaxHopsOption,
    MaxNodesOption,
    NowOption,
    OutputsOption,
    StateOption,
    app,
    command_settings,
    err,
    out,
    write_atomically,
)
from mlcopilot.cli.scan_guard import (
    OutputFormat,
    opened_for_scan,
    paired_reports,
    scan_clock,
    walk_limits,
)
from mlcopilot.errors import ConfigError, UsageError
from mlcopilot.model import Severity

if TYPE_CHECKING:
    from mlcopilot.model import CheckInfo, Deprecation
    from mlcopilot.report.sarif import Locator
    from mlcopilot.scan.whatif import ImpactReport


IMPACT_FORMATS = (
    OutputFormat.table,
    OutputFormat.json,
    OutputFormat.markdown,
    OutputFormat.junit,
    OutputFormat.sarif,
    OutputFormat.github,
)
"""The formats of ``scan`` that ``impact`` writes too."""


@app.command("impact")
def impact_command(
    dataset: Annotated[
        str,
        typer.Argument(
            help="The dataset: its urn, or its name (e.g. raw.customers) when one dataset "
            "upstream of a model has it.",
            show_default=False,
        ),
    ],
    drop: Annotated[
        list[str] | None,
        typer.Option("--drop", help="A column dropped (repeatable).", show_default=False),
    ] = None,
    rename: Annotated[
        list[str] | None,
        typer.Option(
            "--rename", help="A column renamed, OLD=NEW (repeatable).", show_default=False
        ),
    ] = None,
    retype: Annotated[
        list[str] | None,
        typer.Option(
            "--retype",
            help="A column's new type, COLUMN=TYPE: a native type (bigint, varchar) or "
            "DataHub's logical one (StringType) (repeatable).",
            show_default=False,
        ),
    ] = None,
    deprecate: Annotated[
        bool, typer.Option("--deprecate", help="The dataset deprecated in DataHub.")
    ] = False,
    deprecation_note: Annotated[
        str,
        typer.Option("--deprecation-note", help="With --deprecate: the owners' note."),
    ] = "",
    decommission: Annotated[
        str | None,
        typer.Option(
            "--decommission",
            help="With --deprecate: the decommission time, ISO-8601.",
            show_default=False,
        ),
    ] = None,
    replacement: Annotated[
        str | None,
        typer.Option(
            "--replacement", help="With --deprecate: the replacement's urn.", show_default=False
        ),
    ] = None,
    schema_file: Annotated[
        Path | None,
        typer.Option(
            "--schema-file",
            help="The proposed schema instead of column flags: a DataHub schemaMetadata aspect "
            "(or an MCP/MCE holding one), or a dbt manifest.json (the node named like the "
            "dataset). Drops, additions, type changes and renames are derived.",
            show_default=False,
        ),
    ] = None,
    catalog: CatalogOption = None,
    state_url: StateOption = None,
    now: NowOption = None,
    output_format: Annotated[
        list[OutputFormat] | None,
        typer.Option(
            "--format",
            help="Report format: table, json, markdown (a pull-request comment), junit, sarif, "
            "github. Repeatable, in pairs with --output.  [default: table]",
            show_default=False,
        ),
    ] = None,
    output: OutputsOption = None,
    fail_on: Annotated[
        Severity | None,
        typer.Option(help="Exit 1 when a model would be affected at or above this severity."),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only the closing line and errors."),
    ] = False,
    max_hops: MaxHopsOption = 50,
    max_nodes: MaxNodesOption = 10_000,
) -> None:
    """Preview which models a change to a dataset would break, and how badly."""
    from mlcopilot.service import Service

    # Whatever can fail locally fails here, before the catalog is read; what needs no parsing
    # fails before the preview (the scan, the state store) is imported, so it costs little.
    clock = scan_clock(now)
    limits = walk_limits(max_hops, max_nodes)
    deprecation = _deprecation(deprecate, deprecation_note, decommission, replacement)
    if schema_file is not None and (drop or rename or retype):
        raise UsageError(
            "--schema-file: the changes are derived from it; give it without --drop, "
            "--rename or --retype"
        )
    # No flag at all is no change (column flags given make one, or parse_changes refuses them).
    if not (drop or rename or retype) and deprecation is None and schema_file is None:
        raise UsageError(
            "no change to preview: give --drop, --rename, --retype, --deprecate or --schema-file"
        )

    from mlcopilot.checks.column_types import platform_of
    from mlcopilot.cli.render.impact_report import headline
    from mlcopilot.scan.whatif import (
        derive_changes,
        parse_changes,
        read_schema_file,
        resolve_dataset,
    )

    started = time.monotonic()
    changes = parse_changes(
        drop=drop or (), rename=rename or (), retype=retype or (), deprecation=deprecation
    )
    reports = paired_reports(output_format or [OutputFormat.table], output or [])
    for each_format, _ in reports:
        if each_format not in IMPACT_FORMATS:
            raise UsageError(
                f"--format {each_format.value}: impact writes "
                + ", ".join(f.value for f in IMPACT_FORMATS)
            )
    settings = command_settings(catalog, state_url)
    service = Service.from_settings(settings)
    checks = service.checks
    locator = None
    if any(each_format is OutputFormat.sarif for each_format, _ in reports):
        from mlcopilot.report.sarif import locator_from_settings

        locator = locator_from_settings(settings)
        if schema_file is not None and locator.manifest is None:
            # A dbt manifest given as the proposed schema locates the results too (another
            # schema file does not: its own read below says what is wrong with it).
            with contextlib.suppress(ConfigError):
                locator = locator_from_settings(settings, manifest=schema_file)
    with opened_for_scan(settings, dry_run=True) as (cat, store):
        urn = resolve_dataset(cat, dataset, limits)
        if schema_file is not None:
            from dataclasses import replace

            current = cat.nodes([urn])[urn]
            proposed = read_schema_file(schema_file, urn, current.schema)
            derived = derive_changes(
                current.schema, proposed, source=f"{schema_file.name}", platform=platform_of(urn)
            )
            changes = replace(derived, deprecation=deprecation)
        report = service.preview_change(cat, store, urn, changes, clock, limits)
    infos = [check.info for check in checks]
    *others, last = sorted(reports, key=lambda pair: pair[1] is None)
    for each_format, path in others:
        if path is not None:
            write_atomically(path, _render(report, each_format, infos, fail_on, locator))
            if not quiet:
                err.print(f"Report written to {path}")
    each_format, path = last
    closing = headline(report) + f" ({time.monotonic() - started:.1f} s)"
    if each_format is OutputFormat.table and path is None:
        if not quiet:
            from mlcopilot.cli.render.impact_report import print_impact

            print_impact(report, out)
            out.print()
        out.print(closing, soft_wrap=True, markup=False)
    else:
        text = _render(report, each_format, infos, fail_on, locator)
        if path is None:
            sys.stdout.write(text)
            err.print(closing, soft_wrap=True, markup=False)
        else:
            write_atomically(path, text)
            if not quiet:
                err.print(f"Report written to {path}")
            out.print(closing, soft_wrap=True, markup=False)
    if fail_on is not None and report.fails(fail_on):
        failing = report.fails(fail_on)
        err.print(
            f"The gate failed: {len(failing)} of {len(report.models)} downstream models would "
            f"be affected at or above {fail_on.value}.",
            soft_wrap=True,
            markup=False,
        )
        raise typer.Exit(1)


def _deprecation(
    deprecate: bool, note: str, decommission: str | None, replacement: str | None
) -> Deprecation | None:
    """The deprecation ``--deprecate`` and its flags ask for; None without ``--deprecate``."""
    from mlcopilot.cli._app import parse_now
    from mlcopilot.model import Deprecation

    given = [
        flag
        for flag, value in (
            ("--deprecation-note", note),
            ("--decommission", decommission),
            ("--replacement", replacement),
        )
        if value
    ]
    if not deprecate:
        if given:
            raise UsageError(f"{' and '.join(given)}: only with --deprecate")
        return None
    when = None
    if decommission is not None:
        try:
            when = parse_now(decommission)
        except UsageError:
            raise UsageError(
                f"--decommission {decommission!r} is not an ISO-8601 time (e.g. 2027-03-31)"
            ) from None
    if replacement is not None and not replacement.startswith("urn:li:"):
        raise UsageError(f"--replacement {replacement!r}: expected an urn (urn:li:...)")
    return Deprecation(note=note, decommission_time=when, replacement=replacement)


def _render(
    report: ImpactReport,
    output_format: OutputFormat,
    checks: list[CheckInfo],
    fail_on: Severity | None,
    locator: Locator | None = None,
) -> str:
    """The report in one format (``paired_reports`` turns a table bound for a file to markdown)."""
    from mlcopilot.cli.render import impact_report

    if output_format is OutputFormat.json:
        return impact_report.render_impact_json(report, fail_on)
    if output_format is OutputFormat.junit:
        from mlcopilot.report.junit import render_junit

        return render_junit(report.as_scan_result(), checks, fail_on)
    if output_format is OutputFormat.sarif:
        from mlcopilot.report.sarif import render_sarif

        return render_sarif(report.as_scan_result(), checks, locator)
    markdown = impact_report.render_impact_markdown(report, checks, fail_on)
    if output_format is OutputFormat.github:
        from mlcopilot.incidents.gate import GateRules, evaluate_gate
        from mlcopilot.model import IncidentChanges
        from mlcopilot.report.github import append_step_summary, render_github

        result = report.as_scan_result()
        verdict = None
        if fail_on is not None:
            # Only the severity rule: coverage is not the change's doing.
            rules = GateRules(fail_on=fail_on, fail_on_gaps=False)
            verdict = evaluate_gate(rules, result.models, IncidentChanges())
        try:
            append_step_summary(markdown)
        except OSError as exc:
            raise UsageError(f"$GITHUB_STEP_SUMMARY: cannot write: {exc.strerror}") from exc
        return render_github(result, verdict)
    return markdown
