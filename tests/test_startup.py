"""A fast start: a command loads only the backends it uses, and a bad flag loads none.

``mlcopilot --help`` and ``mlcopilot checks`` load no backend; a ``lite:`` scan loads neither
the GMS backend nor MCP; a usage error is said before SQLAlchemy or the DataHub SDK is
imported. What keeps them fast is what they do not import: the DataHub SDK, SQLAlchemy, MCP
and the GitHub and Slack clients each cost tenths of a second. So this asserts on
``sys.modules`` in a fresh interpreter (a timing would be flaky); ``benchmarks/startup.py``
measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest

from testing.demo_home import demo, demo_home

pytestmark = pytest.mark.slow  # each test starts a fresh interpreter

__all__ = ["demo", "demo_home"]

HEAVY = ("datahub", "sqlalchemy", "alembic", "mcp", "githubkit", "mlcopilot.notify.sinks.slack")

PROBE = """
import json, sys
from typer.testing import CliRunner
from mlcopilot.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"exit": result.exit_code, "output": result.output, "heavy": heavy}}))
"""


class Probe(TypedDict):
    exit: int
    output: str
    heavy: list[str]


def run_in_fresh_interpreter(*args: str, watch: tuple[str, ...] = HEAVY) -> Probe:
    """Run ``mlcopilot ARGS``; ``heavy``: which of the ``watch`` modules it left loaded."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=watch), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: Probe = json.loads(completed.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("--help",), "Watch what feeds your ML models in DataHub"),
        (("checks",), "schema_drift"),
        (("scan", "--help"), "--fail-on"),
    ],
)
def test_the_command_starts_without_loading_a_backend(args: tuple[str, ...], shown: str) -> None:
    result = run_in_fresh_interpreter(*args)

    assert result["exit"] == 0
    assert shown in result["output"]
    assert result["heavy"] == []


def test_the_probe_sees_a_backend_when_a_command_loads_one() -> None:
    # The same probe on a command that opens the state store (an empty one: it says so and
    # exits 2): SQLAlchemy is loaded. Without this, a probe that never saw any module would
    # pass the test above whatever happened.
    result = run_in_fresh_interpreter("incidents", "list", "--state-url", "sqlite://")

    assert "holds no mlcopilot state" in result["output"]
    assert "sqlalchemy" in result["heavy"]


NOT_FOR_LITE = (
    "mcp",
    "mlcopilot.catalog.mcp",
    "mlcopilot.catalog.datahub.catalog",
    "githubkit",
    "mlcopilot.notify.sinks.slack",
)
"""What a ``lite:`` scan notifying nobody never runs: the MCP and GMS backends, the GitHub
and Slack clients. (``datahub.ingestion.graph`` is loaded all the same: DataHub's own
``SqliteLite``, which the Lite backend writes through, imports its GMS client.)"""


def test_a_lite_scan_loads_neither_the_gms_backend_nor_mcp(demo: Path, tmp_path: Path) -> None:
    result = run_in_fresh_interpreter(
        "scan",
        "--catalog",
        f"lite:{demo / 'catalog.db'}",
        "--state-url",
        f"sqlite:///{tmp_path / 'state.db'}",
        "--now",
        "2026-11-20T09:00:00Z",
        watch=(*NOT_FOR_LITE, "mlcopilot.catalog.lite", "sqlalchemy"),
    )

    assert result["exit"] == 0, result["output"]
    assert "scanned 1 model" in result["output"]
    # What it did use is there: the probe would see the others.
    assert result["heavy"] == ["mlcopilot.catalog.lite", "sqlalchemy"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("scan", "--now", "garbage"), "--now 'garbage' is not an ISO-8601 time"),
        (("scan", "--max-hops", "0"), "--max-hops 0: must be at least 1"),
        (("scan", "--fail-on-new"), "--fail-on-new: only with --fail-on SEVERITY"),
        (("impact", "raw.customers", "--drop", "email", "--now", "garbage"), "--now 'garbage'"),
        (("impact", "raw.customers"), "no change to preview"),
    ],
)
def test_a_usage_error_is_said_before_a_backend_loads(args: tuple[str, ...], said: str) -> None:
    result = run_in_fresh_interpreter(*args)

    assert result["exit"] == 2
    assert said in result["output"]
    assert result["heavy"] == []


BACKEND_PROBE = """
import json, sys
sys.modules[sys.argv[1]] = None  # as if it were not installed
from mlcopilot.errors import PluginUnavailable
from mlcopilot.scan.wiring import open_catalog
try:
    open_catalog("mcp:http://localhost:9")
except PluginUnavailable as exc:
    print(json.dumps({"error": "PluginUnavailable", "message": str(exc)}))
except ImportError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


@pytest.mark.parametrize(
    ("missing", "error", "message"),
    [
        # The backend's own dependency: named, with the package to install.
        ("mcp", "PluginUnavailable", "the mcp: catalog needs the Python package mcp"),
        # A module missing inside an installed package: a failure underneath, left as it is.
        ("mcp.client.stdio", "ModuleNotFoundError", "mcp.client.stdio"),
    ],
)
def test_a_backend_that_cannot_be_imported_says_why(missing: str, error: str, message: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", BACKEND_PROBE, missing],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    said = json.loads(completed.stdout.splitlines()[-1])

    assert said["error"] == error
    assert message in said["message"]


def test_each_backend_entry_point_is_the_one_the_wiring_calls() -> None:
    # The wiring calls them through LiteOpener and ServerCatalog, which mypy cannot check
    # against a string: this does.
    from mlcopilot.catalog import BACKENDS, load_backend
    from mlcopilot.catalog.datahub.catalog import DataHubCatalog
    from mlcopilot.catalog.lite import open_lite_catalog
    from mlcopilot.catalog.mcp.catalog import McpCatalog

    loaded = {kind: load_backend(kind) for kind in BACKENDS}

    assert loaded == {"lite": open_lite_catalog, "datahub": DataHubCatalog, "mcp": McpCatalog}
