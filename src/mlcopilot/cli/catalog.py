"""``mlcopilot catalog load|models`` and ``baseline accept``: what a catalog holds."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mlcopilot.cli._app import (
    CatalogOption,
    Every,
    FormatOption,
    ListFormat,
    OutputOption,
    StateOption,
    baseline_app,
    catalog_app,
    command_settings,
    err,
    opened,
    out,
    rendered,
    write_output,
)
from mlcopilot.text.wording import count


@catalog_app.command("load")
def catalog_load(
    files: Annotated[list[Path], typer.Argument(help="DataHub metadata files (JSON MCPs/MCEs).")],
    catalog: CatalogOption = None,
) -> None:
    """Load DataHub metadata files into the embedded catalog (streamed, all or nothing)."""
    import signal

    from mlcopilot.catalog.loader import check_files, load_metadata_files
    from mlcopilot.scan.wiring import open_lite

    settings = command_settings(catalog=catalog)
    check_files(files)  # a missing file must not leave an empty catalog behind
    lite = open_lite(settings.catalog_spec)

    stopping = False

    def stop(signum: int, frame: object) -> None:
        # Unwind: the load's transaction rolls back and the catalog stays as it was. Raised
        # inside a finalizer or a GC callback, Python drops it (Ctrl-C's default handler's
        # too, hence both signals here): the next progress stops the load.
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {each: signal.signal(each, stop) for each in signals}
    try:
        with _load_progress() as shown:

            def progress(done: int, total: int) -> None:
                if stopping:
                    raise KeyboardInterrupt
                shown(done, total)

            summary = load_metadata_files(lite, files, progress=progress)
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]: nothing was loaded, the catalog is as it was")
        raise typer.Exit(130) from None
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
        lite.close()
    out.print(
        f"Loaded {summary.records} records from {summary.files} file(s) into {lite.label}: "
        f"{summary.urns} entities, {summary.aspects} aspects, {summary.new_versions} new "
        f"aspect versions, {summary.patches} patches applied, {summary.skipped} skipped."
    )
    for skip in summary.skips:
        out.print(f"  skipped {escape(skip)}")
    if summary.skipped > len(summary.skips):
        out.print(f"  ... and {summary.skipped - len(summary.skips)} more skipped")


@contextmanager
def _load_progress() -> Iterator[Callable[[int, int], None]]:
    """``catalog load``'s progress: a bar by bytes on a terminal, else a line every 15 s."""
    if err.is_terminal:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
        with Progress(TextColumn("loading"), *columns, console=err, transient=True) as bar:
            task = bar.add_task("load", total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    every = Every()

    def line(done: int, total: int) -> None:
        if every.due():
            rate = done / every.elapsed() / 1e6
            err.print(f"loading: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB ({rate:.1f} MB/s)")

    yield line


_MODEL_URN = re.compile(r"^urn:li:mlModel:\((?P<platform>[^,]+),.*,(?P<env>[^,()]+)\)$")


@catalog_app.command("models")
def catalog_models(
    catalog: CatalogOption = None,
    output_format: FormatOption = ListFormat.table,
    output: OutputOption = None,
) -> None:
    """List the ML models a catalog holds: what `scan --model` takes (a name or an urn)."""
    from mlcopilot.cli.render.terminal import print_models
    from mlcopilot.report.json import render_models_json
    from mlcopilot.scan.wiring import open_catalog
    from mlcopilot.text.names import short_name

    settings = command_settings(catalog=catalog)
    cat = open_catalog(settings.catalog_spec, settings)
    try:
        label = cat.label
        urns = cat.models()
        edges = cat.upstream(urns) if urns else []
    finally:
        cat.close()
    upstream: dict[str, set[str]] = {urn: set() for urn in urns}
    for edge in edges:
        if edge.downstream in upstream:
            upstream[edge.downstream].add(edge.upstream)
    rows = []
    for urn in urns:
        parts = _MODEL_URN.match(urn)
        platform = short_name(parts["platform"]) if parts else ""
        env = parts["env"] if parts else ""
        rows.append((urn, short_name(urn), platform, env, len(upstream[urn])))
    if output_format is ListFormat.json:
        write_output(output, render_models_json(rows))
        return
    if not rows:
        out.print(f"No ML models in {escape(label)}.")
        return
    if output is None:
        print_models(rows, out)
    else:
        write_output(output, rendered(lambda console: print_models(rows, console)))


@baseline_app.command("accept")
def baseline_accept(
    model: Annotated[str, typer.Argument(help="The model urn whose upstream schemas to accept.")],
    catalog: CatalogOption = None,
    state_url: StateOption = None,
) -> None:
    """Accept the current upstream schemas and profiles as the model's baseline (ends drift)."""
    from mlcopilot.scan import accept_all_baselines
    from mlcopilot.text.names import short_name

    with opened(command_settings(catalog, state_url), create=True) as (cat, store):
        accepted, profiles = accept_all_baselines(cat, store, model, now=datetime.now(UTC))
    profiled = f" and the current profile of {count(len(profiles), 'dataset')}" if profiles else ""
    out.print(
        f"Accepted the current schema of {count(len(accepted), 'upstream dataset')}{profiled} "
        f"for {short_name(model)}; the next scan resolves their drift incidents."
    )
