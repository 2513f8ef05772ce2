"""The use cases every front-end calls: a scan, a change preview and a report page by one Service.

The command line, the MCP server and the watcher each build a :class:`~mlcopilot.service.Service`
from their settings; these hold what they rely on: the configured checks and sinks, the
catalog and store opened (and closed) as the settings say, and the same answers as the CLI.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from mlcopilot.model import OutboxStatus
from mlcopilot.scan import ScanOptions
from mlcopilot.scan.whatif import parse_changes
from mlcopilot.service import Service
from mlcopilot.settings import load_settings
from testing.demo_home import demo, demo_home
from testing.installed_cli import run_cli

__all__ = ["demo", "demo_home"]  # the fixtures

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
MODEL = "churn_predictor_v1"


def service_in(home: Path, *, write_back: bool | None = None) -> Service:
    settings = load_settings(environ={"MLCOPILOT_HOME": str(home)})
    return Service.from_settings(settings, write_back=write_back)


def test_a_dry_run_scan_finds_what_the_command_finds_and_records_nothing(demo: Path) -> None:
    service = service_in(demo)
    with service.opened(dry_run=True) as (catalog, store):
        result = service.scan(catalog, store, ScanOptions(now=NOW, dry_run=True))
    cli = run_cli(demo, "scan", "--now", "2026-11-20T09:00:00Z", "--dry-run", "--format", "json")
    assert cli.code == 0, cli.stderr
    assert sorted(f.id for f in result.findings) == sorted(
        f["id"] for m in cli.json()["models"] for f in m["findings"]
    )
    assert result.run_id is None
    assert not (demo / "state.db").exists()


def test_a_scan_that_does_not_deliver_commits_its_outbox_rows_and_returns(demo: Path) -> None:
    service = service_in(demo)
    with service.opened(create=True) as (catalog, store):
        result = service.scan(catalog, store, ScanOptions(now=NOW, models=(MODEL,)), deliver=False)
        pending = store.outbox(statuses=[OutboxStatus.PENDING])
    assert result.run_id is not None
    assert result.relay is None  # nothing was delivered here
    assert result.changes.opened
    assert {row.sink for row in pending} == {"datahub"}  # the write-back waits for a relay


def test_write_back_off_plans_no_catalog_row(demo: Path) -> None:
    service = service_in(demo, write_back=False)
    with service.opened(create=True) as (catalog, store):
        result = service.scan(catalog, store, ScanOptions(now=NOW), deliver=False)
        pending = store.outbox(statuses=[OutboxStatus.PENDING])
    assert result.changes.opened
    assert pending == []


def test_a_change_preview_takes_the_datasets_name(demo: Path) -> None:
    service = service_in(demo)
    changes = parse_changes(drop=["email"], rename=(), retype=(), deprecation=None)
    with service.opened(dry_run=True) as (catalog, store):
        report = service.preview_change(catalog, store, "raw.customers", changes, NOW)
    assert report.dataset.endswith("raw.customers,PROD)")
    assert report.models


def test_the_report_page_is_a_dry_run_scan_and_a_page(demo: Path) -> None:
    service = service_in(demo)
    with service.opened(dry_run=True) as (catalog, store):
        result, page = service.report_page(catalog, store, ScanOptions(now=NOW, dry_run=True))
    assert result.dry_run
    assert page.startswith("<!DOCTYPE html>") or page.lstrip().lower().startswith("<!doctype")
    assert MODEL in page
