"""``mlcopilot datahub setup`` and ``doctor`` against the stand-in GMS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.datahub.doctor import DoctorCheck, run_doctor
from mlcopilot.catalog.datahub.setup import definitions, setup_datahub
from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY
from mlcopilot.model import PropertyWrite
from testing.builders import dataset, ml_model, model_urn
from tests.catalog.datahub_backend import needs_standin, start_standin

TAGS = {name: info.tag for name, info in builtin_infos().items()}

pytestmark = needs_standin

TOKEN = "canary-token-0a9b8c7d6e5f4a3b"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    started = start_standin(
        [*ml_model("churn"), *dataset("raw.customers", fields=[("id", "long")])],
        tmp_path / "standin",
        token=TOKEN,
    )
    yield started
    started.__exit__(None, None, None)


def settings(server: Any, token: str | None = TOKEN) -> DataHubSettings:
    return DataHubSettings(server.url, token=token)


def by_name(checks: list[DoctorCheck]) -> dict[str, DoctorCheck]:
    return {c.name: c for c in checks}


def assert_no_token(checks: list[DoctorCheck]) -> None:
    assert all(TOKEN not in c.detail for c in checks)


def test_setup_creates_every_definition_once(server: Any) -> None:
    catalog = DataHubCatalog(server.url, token=TOKEN, timeout=5.0)
    first = setup_datahub(catalog)
    assert set(first.created) == {d.urn for d in definitions()}
    assert len(first.created) == 11  # a tag per built-in check, 4 structured properties
    assert first.existing == ()
    second = setup_datahub(catalog)
    assert second.created == ()
    assert set(second.existing) == set(first.created)
    nodes = catalog.nodes([*TAGS.values(), OPEN_RISKS_PROPERTY])
    assert all(node.exists for node in nodes.values())
    catalog.close()


def test_setup_dry_run_writes_nothing(server: Any) -> None:
    catalog = DataHubCatalog(server.url, token=TOKEN, timeout=5.0)
    assert len(setup_datahub(catalog, dry_run=True).created) == 11
    assert len(catalog.missing_definitions(definitions())) == 11
    catalog.close()


def test_write_back_keeps_the_definitions_setup_made(server: Any) -> None:
    catalog = DataHubCatalog(server.url, token=TOKEN, timeout=5.0)
    setup_datahub(catalog)
    write = PropertyWrite(model_urn("churn"), OPEN_RISKS_PROPERTY, ("none",))
    assert catalog.apply([write]) == [write]
    (definition,) = catalog.nodes([OPEN_RISKS_PROPERTY]).values()
    assert definition.exists
    assert setup_datahub(catalog).created == ()
    catalog.close()


def test_doctor_on_a_healthy_server(server: Any) -> None:
    catalog = DataHubCatalog(server.url, token=TOKEN, timeout=5.0)
    setup_datahub(catalog)
    catalog.close()
    checks = by_name(run_doctor(settings(server)))
    assert list(checks) == [
        "settings",
        "reachable",
        "version",
        "token",
        "incidents on ML entities",
        "platform privileges",
        "edit privileges",
        "definitions",
    ]
    for name in ("settings", "reachable", "version", "token", "definitions"):
        assert checks[name].ok, checks[name]
    assert_no_token(list(checks.values()))


def test_doctor_without_setup_says_to_run_it(server: Any) -> None:
    checks = by_name(run_doctor(settings(server)))
    assert not checks["definitions"].ok
    assert not checks["definitions"].required
    assert "mlcopilot datahub setup" in checks["definitions"].detail


def test_doctor_on_a_refused_token(server: Any) -> None:
    checks = run_doctor(settings(server, token="wrong-token-123456"))
    assert [c.name for c in checks] == ["settings", "reachable", "version", "token"]
    assert not checks[-1].ok
    assert checks[-1].required
    assert "401" in checks[-1].detail
    assert_no_token(checks)


def test_doctor_on_a_stopped_server(server: Any) -> None:
    url = server.url
    server.__exit__(None, None, None)
    checks = run_doctor(DataHubSettings(url, token=TOKEN), timeout=2.0)
    assert [c.name for c in checks] == ["settings", "reachable"]
    assert not checks[-1].ok
    assert "connection refused" in checks[-1].detail
    assert url in checks[-1].detail
    assert_no_token(checks)


def test_doctor_on_an_old_server(tmp_path: Path) -> None:
    old = start_standin(ml_model("churn"), tmp_path / "old", version="v1.3.0", token=TOKEN)
    try:
        checks = by_name(run_doctor(settings(old)))
    finally:
        old.__exit__(None, None, None)
    assert not checks["version"].ok
    assert not checks["version"].required
    assert "1.4" in checks["version"].detail
    assert checks["token"].ok


def test_doctor_reports_bad_settings() -> None:
    (check,) = run_doctor("datahub:not-a-url")
    assert not check.ok
    assert check.name == "settings"
