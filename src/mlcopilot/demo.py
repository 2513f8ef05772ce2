"""`mlcopilot demo`: the whole loop on a fresh embedded DataHub catalog, in under a minute.

It loads real DataHub metadata files (shipped in ``mlcopilot/demo_data``; built by
``scripts/build_demo_data.py``) into DataHub Lite, scans, changes an upstream schema, scans
again, shows the write-back, and resolves an incident when the column comes back. The demo's
clock is fixed, so every run tells the same story.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import as_file, files
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks import load_checks
from mlcopilot.model import IncidentWrite, short_name
from mlcopilot.protocols import StateStore
from mlcopilot.scan import ScanOptions, ScanResult, scan
from mlcopilot.store import default_state_url, open_store
from mlcopilot.terminal import print_scan
from mlcopilot.writeback import OPEN_RISKS_PROPERTY

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
SCAN_TIMES = (
    datetime(2026, 11, 20, 9, tzinfo=UTC),
    datetime(2026, 11, 21, 9, tzinfo=UTC),
    datetime(2026, 11, 22, 9, tzinfo=UTC),
)


def run_demo(home: Path, console: Console) -> None:
    """Run the demo in ``home`` (its catalog and state are recreated from scratch)."""
    home.mkdir(parents=True, exist_ok=True)
    catalog_path = home / "catalog.db"
    for stale in (catalog_path, home / "state.db"):
        stale.unlink(missing_ok=True)
    catalog = open_lite_catalog(catalog_path, create=True)
    store = open_store(default_state_url(home))
    try:
        _story(catalog, store, catalog_path, home, console)
    finally:
        store.close()
        catalog.close()


def _story(
    catalog: LiteCatalog, store: StateStore, catalog_path: Path, home: Path, console: Console
) -> None:
    checks = load_checks()

    def run_scan(when: datetime) -> ScanResult:
        result = scan(catalog, store, checks, ScanOptions(now=when))
        print_scan(result, console)
        return result

    _step(console, "1/5", "Build a DataHub catalog (DataHub Lite, embedded — no server)")
    summary = _load(catalog, "01_catalog.json")
    console.print(
        f"Loaded {summary} from DataHub metadata files: the MLModel churn_predictor_v1, trained "
        "2026-10-01 on curated.customer_360, with two MLFeatures fed by raw.customers (an email "
        "column tagged PII) and raw.transactions (24 h freshness SLA), and a deprecated "
        "legacy.customer_segments upstream of the curated table (column-level lineage)."
    )

    _step(console, "2/5", f"First scan, {SCAN_TIMES[0]:%Y-%m-%d %H:%M} UTC")
    console.print(
        "The walk follows model → features → feature table → datasets, and the training data "
        "DataHub's own lineage index does not follow. Upstream schemas are recorded as the "
        "model's baseline."
    )
    run_scan(SCAN_TIMES[0])

    _step(console, "3/5", "Upstream change: raw.customers renames `country`, drops `signup_date`")
    _load(catalog, "02_schema_change.json")
    console.print("Nothing breaks loudly. The feature `tenure_days` reads `signup_date`.")
    second = run_scan(SCAN_TIMES[1])

    _step(console, "4/5", "What the next person opening raw.customers in DataHub sees")
    _show_writeback(catalog, second, catalog_path, console)

    _step(console, "5/5", "The upstream team restores `signup_date`")
    _load(catalog, "03_restore_column.json")
    third = run_scan(SCAN_TIMES[2])
    resolved = ", ".join(f"{i.id} ({i.check}, {i.field})" for i in third.changes.resolved)
    console.print(f"[green]Resolved:[/] {escape(resolved or 'nothing')}.")
    console.print(
        "The rename stays reported until someone accepts the new schema with "
        "`mlcopilot baseline accept MODEL`.\n"
    )
    console.print(
        f"Try it yourself: [bold]MLCOPILOT_HOME={escape(str(home))} mlcopilot incidents list[/]"
        f" · [bold]mlcopilot scan --catalog lite:{escape(str(catalog_path))} --format json[/]"
    )


def _load(catalog: LiteCatalog, name: str) -> str:
    with as_file(files("mlcopilot") / "demo_data" / name) as path:
        summary = load_metadata_files(catalog, [path])
    return f"{summary.records} aspects for {summary.urns} entities"


def _show_writeback(catalog: LiteCatalog, result: ScanResult, path: Path, console: Console) -> None:
    nodes = catalog.nodes([CUSTOMERS, MODEL])
    tags = ", ".join(sorted(short_name(t) for t in nodes[CUSTOMERS].tags))
    risks = nodes[MODEL].structured_properties.get(OPEN_RISKS_PROPERTY.rsplit(":", 1)[-1], ())
    console.print(f"raw.customers tags: {escape(tags)}")
    console.print(
        f"churn_predictor_v1 io.mlcopilot.openRisks: {escape(', '.join(map(str, risks)))}"
    )
    incident = next((w for w in result.writes if isinstance(w, IncidentWrite)), None)
    console.print(
        "Every incident is a native DataHub incident plus a document with the full context "
        "(what changed, the lineage path, evidence, suggested action)."
    )
    if incident is not None:
        console.print(
            "Look with DataHub's own CLI (note: `datahub lite init` points ~/.datahubenv at "
            "this file):\n"
            f"  datahub lite init --type sqlite --file {escape(str(path))}\n"
            f"  datahub lite get --urn '{escape(incident.urn)}'"
        )


def _step(console: Console, number: str, title: str) -> None:
    console.print()
    console.print(Rule(f"[bold]{number}  {escape(title)}[/]", align="left"))
