"""The MCP tools the ``mcp:`` backend calls are one set, and ``mlcopilot doctor`` checks it.

:data:`~mlcopilot.catalog.mcp.catalog.TOOLS_CALLED` is proved by behaviour: the demo's three
scans through the real ``mcp-server-datahub``, a dated schema read and a removal record every
tool the backend asks the session for, and that is exactly the set. The doctor is run against
a server offering that set with one tool taken away at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.datahub.doctor import DoctorCheck, run_doctor
from mlcopilot.catalog.datahub.setup import setup_datahub
from mlcopilot.catalog.loader import read_metadata_file
from mlcopilot.catalog.mcp.catalog import TOOLS_CALLED, McpCatalog
from mlcopilot.catalog.mcp.session import McpSession
from mlcopilot.checks import load_checks
from mlcopilot.cli.demo_run import CUSTOMERS, SCAN_TIMES
from mlcopilot.model import PropertyWrite, TagWrite, Write
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store import open_store
from testing.builders import dataset, ml_model
from tests.catalog.datahub_backend import needs_standin, start_standin
from tests.catalog.mcp_backend import mcp_catalog_for, needs_mcp, shared_server
from tests.conftest import DEMO_DATA

TOKEN = "canary-token-7c6b5a4d3e2f1a0b"


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every tool the shared server is asked for, in order."""
    session = shared_server().session
    called: list[str] = []
    call_all = session.call_all

    def recording(calls: Sequence[tuple[str, Mapping[str, Any]]], **options: Any) -> list[Any]:
        called.extend(tool for tool, _ in calls)
        return call_all(calls, **options)

    monkeypatch.setattr(session, "call_all", recording)
    return called


@needs_mcp
def test_the_backend_calls_exactly_the_tools_it_declares(
    recorded: list[str], tmp_path: Path
) -> None:
    files = [read_metadata_file(path)[1] for path in sorted(DEMO_DATA.glob("*.json"))]
    server = start_standin(files[0], tmp_path / "standin")
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    written: list[Write] = []
    try:
        for step, when in enumerate(SCAN_TIMES):
            if step:
                server.write(files[step])
            catalog = mcp_catalog_for(server)  # a catalog per scan, as each CLI run opens one
            written += scan(catalog, store, load_checks(), ScanOptions(now=when)).writes
            catalog.close()
        catalog = mcp_catalog_for(server)
        assert catalog.schema_as_of(CUSTOMERS, datetime(2100, 1, 1, tzinfo=UTC)) is not None
        # The scans only add; taking a risk tag and the open-risks property off again is
        # what an accepted baseline or a fix does.
        tag = next(w for w in written if isinstance(w, TagWrite) and w.present)
        prop = next(w for w in written if isinstance(w, PropertyWrite) and w.values)
        removals: list[Write] = [
            TagWrite(tag.entity, tag.tag, present=False),
            PropertyWrite(prop.entity, prop.property, ()),
        ]
        assert catalog.apply(removals) == removals
        catalog.close()
    finally:
        store.close()
        server.__exit__(None, None, None)
    assert set(recorded) == TOOLS_CALLED, (
        f"called but not declared: {sorted(set(recorded) - TOOLS_CALLED)}; "
        f"declared but never called: {sorted(TOOLS_CALLED - set(recorded))}"
    )


def test_a_tool_outside_the_set_is_refused_before_the_server_starts() -> None:
    catalog = McpCatalog(DataHubSettings(server="http://127.0.0.1:9"))
    with pytest.raises(ValueError, match="list_schema_fields: add the tool to TOOLS_CALLED"):
        catalog._call("list_schema_fields", {"urn": "urn:li:dataset:x"})
    catalog.close()


@pytest.fixture
def gms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A stand-in GMS that passes every DataHub check of the doctor (set up, token known)."""
    server = start_standin(
        [*ml_model("churn"), *dataset("raw.customers", fields=[("id", "long")])],
        tmp_path / "standin",
        token=TOKEN,
    )
    sdk = DataHubCatalog(server.url, token=TOKEN, timeout=5.0)
    setup_datahub(sdk)
    sdk.close()
    monkeypatch.setenv("DATAHUB_GMS_TOKEN", TOKEN)
    yield server
    server.__exit__(None, None, None)


def doctor_offered(server: Any, offered: frozenset[str], monkeypatch: Any) -> DoctorCheck:
    """The doctor's MCP verdict when the server offers ``offered`` (and nothing starts)."""
    monkeypatch.setattr(McpSession, "tools", lambda self: offered)
    checks = run_doctor(f"mcp:{server.url}")
    assert all(c.ok for c in checks if c.required and c.name != "mcp server"), checks
    assert checks[-1].name == "mcp server"
    return checks[-1]


@needs_standin
@needs_mcp
def test_the_doctor_checks_exactly_the_tools_the_backend_calls(
    gms: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    passed = doctor_offered(gms, TOOLS_CALLED, monkeypatch)
    assert passed.ok, passed
    assert passed.detail == f"mcp-server-datahub offers all {len(TOOLS_CALLED)} tools"
    for tool in sorted(TOOLS_CALLED):
        check = doctor_offered(gms, TOOLS_CALLED - {tool}, monkeypatch)
        assert not check.ok, tool
        assert f"does not offer {tool} (" in check.detail
