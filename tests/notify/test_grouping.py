"""One root cause, one notification (T20), inhibition, and two scanners at once (T6, R8)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from mlcopilot.incidents.payload import OutboxStatus
from mlcopilot.model import Severity
from testing.builders import model_urn
from testing.notify_world import CUSTOMERS, world
from testing.postgres import fresh_schema

COLUMNS = [f"col_{n:02d}" for n in range(20)]
MODELS = {"churn": ["raw.customers"], "ltv": ["raw.customers"], "fraud": ["raw.customers"]}


def test_an_upstream_change_breaking_three_models_and_twenty_columns_is_one_notification(
    tmp_path: Path,
) -> None:
    with world(tmp_path, models=MODELS, fields=COLUMNS) as w:
        w.script = {
            "schema_drift": {CUSTOMERS: [(c, Severity.CRITICAL, "removed") for c in COLUMNS]}
        }
        result = w.scan()
        assert len(result.changes.opened) == 60
        assert len(w.github.issues) == 1
        assert len(w.slack.roots()) == 1
        body = w.github.issues[1]["body"]
        assert all(f"`{c}`" in body for c in COLUMNS)
        assert all(name in body for name in ("churn", "ltv", "fraud"))
        assert "3 models, 60 findings" in w.github.issues[1]["title"]
        root_text = "".join(
            b["text"]["text"] for b in w.slack.roots()[0]["blocks"][1:-1] if "text" in b
        )
        assert root_text.count("•") == 60


def test_drift_and_staleness_on_a_deprecated_upstream_fold_into_its_deprecation(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w:
        w.script = {
            "deprecated_source": {CUSTOMERS: [(None, Severity.MEDIUM, None)]},
            "schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]},
            "stale_source": {CUSTOMERS: [(None, Severity.HIGH, None)]},
        }
        w.scan()
        assert len(w.github.issues) == 1
        assert len(w.slack.roots()) == 1
        (issue,) = w.github.issues.values()
        assert issue["title"].startswith("[mlcopilot] Deprecated source at")
        assert "Stale source" not in issue["title"]
        assert "removed" in issue["body"]
        assert "stale source" in issue["body"]


def test_findings_of_a_concurrent_scan_within_group_wait_join_the_first_message(
    tmp_path: Path,
) -> None:
    with world(tmp_path, models={"churn": ["raw.customers"], "ltv": ["raw.customers"]}) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        with w.store() as store:
            catalog_only_churn = w.scan(store, deliver=False)  # committed, not yet sent
        assert len(catalog_only_churn.notifications) == 3  # write-back + GitHub + Slack
        w.clock.advance(timedelta(seconds=10))
        w.script["schema_drift"][CUSTOMERS].append(("b", Severity.HIGH, "removed"))
        w.scan()
        assert len(w.github.issues) == 1
        assert len(w.github.comment_posts()) == 0
        assert "`b`" in w.github.issues[1]["body"]  # folded into the pending open


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


@pytest.mark.postgres
def test_two_scanners_at_once_on_postgresql_notify_once(tmp_path: Path, pg_url: str) -> None:
    store_url = pg_url
    with world(tmp_path, models=MODELS, fields=("a", "b"), state_url=store_url) as w:
        w.script = {
            "pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None), ("b", Severity.HIGH, None)]}
        }
        with w.store():
            pass  # migrate once, before the race
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def scanner() -> None:
            try:
                barrier.wait(timeout=10)
                w.scan()
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=scanner) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        with w.store() as store:
            incidents = store.incidents()
            rows = store.outbox()
        assert len(incidents) == 6
        assert {i.generation for i in incidents} == {1}
        assert len(w.github.issues) == 1
        assert len(w.github.created()) == 1
        assert len(w.slack.roots()) == 1
        notify_rows = [r for r in rows if r.sink != "datahub"]
        assert sorted(r.dedupe_key.split(":")[0] for r in notify_rows) == ["github", "slack"]
        assert all(r.status is OutboxStatus.DONE for r in rows)
        assert model_urn("churn") in {i.model for i in incidents}
