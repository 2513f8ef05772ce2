"""A finding about a column shows the path its column takes (issue 25, item 2).

In the demo, ``raw.customers`` reaches the model two ways: through the feature
``churn_features.tenure_days`` (computed from ``signup_date``) and, by column-level lineage
``email`` → ``email_domain``, through ``curated.customer_360``, the training data. The PII
finding on ``email`` must show the second on every surface (the HTML highlight, the MCP
``explain_incident`` path, the GitHub issue's diagram); the drift of ``signup_date`` the first.
Where no column lineage names the way, the walk's path to the node stays.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from mlcopilot.agent.server import build_server
from mlcopilot.catalog.lite import open_lite_catalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.lineage.columns import ColumnPaths, column_usage
from mlcopilot.protocols import WalkLimits
from mlcopilot.settings import load_settings
from testing.builders import dataset, ml_model, write_metadata_file
from testing.fakes.github import FakeGitHub
from testing.installed_cli import run_cli
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA
from tests.render_html.dom import parse

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
CUSTOMER_360 = "urn:li:dataset:(urn:li:dataPlatform:snowflake,curated.customer_360,PROD)"
TENURE = "urn:li:mlFeature:(churn_features,tenure_days)"
EMAIL_PATH = [MODEL, CUSTOMER_360, CUSTOMERS]
DAY1 = "2026-11-20T09:00:00Z"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo's first scan, delivered to the GitHub fake, with its HTML page and JSON."""
    home = tmp_path_factory.mktemp("column-path") / "home"
    github = FakeGitHub()
    with github.running():
        env = {
            **notify_env(github),
            "MLCOPILOT_GROUP_WAIT": "0",
            "MLCOPILOT_TEST_WRITE_SPACING": "0",
        }
        loaded = run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"), env=env)
        assert loaded.code == 0, loaded.stderr
        ran = run_cli(
            home,
            "scan",
            "--now",
            DAY1,
            "--format",
            "json",
            "--output",
            str(home / "scan.json"),
            "--format",
            "html",
            "--output",
            str(home / "scan.html"),
            env=env,
        )
        assert ran.code in (0, 1), ran.stderr
        bodies = [json.loads(r.text)["body"] for r in github.created()]
    report = json.loads((home / "scan.json").read_text(encoding="utf-8"))
    findings = {f["field"]: f for f in report["models"][0]["findings"] if f["field"]}
    return {
        "home": home,
        "findings": findings,
        "html": (home / "scan.html").read_text(encoding="utf-8"),
        "issues": bodies,
    }


def test_the_walk_reaches_raw_customers_through_the_feature_first(tmp_path: Path) -> None:
    """The premise: the node's own path is not the email's, so the two must be told apart."""
    with open_lite_catalog(tmp_path / "catalog.db", create=True) as catalog:
        load_metadata_files(catalog, [DEMO_DATA / "01_catalog.json"])
        lineage = catalog.lineage(MODEL, WalkLimits())
    assert lineage.paths[CUSTOMERS] == (MODEL, TENURE, CUSTOMERS)
    paths = ColumnPaths(lineage, column_usage(lineage))
    assert paths.path(CUSTOMERS, "email") == tuple(EMAIL_PATH)
    assert paths.path(CUSTOMERS, "signup_date") == (MODEL, TENURE, CUSTOMERS)
    # country_code flows nowhere the model reads: no column path, the finding keeps the node's.
    assert paths.path(CUSTOMERS, "country_code") is None


def test_the_finding_carries_the_columns_path(demo: dict[str, Any]) -> None:
    email = demo["findings"]["email"]
    assert email["check"] == "pii_exposure"
    assert email["path"] == EMAIL_PATH


def test_the_html_highlight_is_the_columns_path(demo: dict[str, Any]) -> None:
    email = demo["findings"]["email"]
    page = parse(demo["html"])
    (row,) = [e for e in page.find("tr", "finding") if e.attrs["data-incident"] == email["id"]]
    assert row.attrs["data-path"].split(" ") == EMAIL_PATH
    # The page's data, which the script lights the path from, says the same.
    (script,) = [e for e in page.find("script") if e.attrs.get("id") == "report-data"]
    data = json.loads(script.text)
    lit = [f["path"] for m in data["models"] for f in m["findings"] if f["incident"] == email["id"]]
    assert lit == [EMAIL_PATH]


def test_the_github_issue_diagram_is_the_columns_path(demo: dict[str, Any]) -> None:
    (body,) = [b for b in demo["issues"] if "PII exposure" in b]
    (mermaid,) = re.findall(r"```mermaid\n(.*?)```", body, flags=re.S)
    assert '"curated.customer_360"' in mermaid
    assert "tenure_days" not in mermaid


def test_explain_incident_gives_the_columns_path(demo: dict[str, Any]) -> None:
    email = demo["findings"]["email"]
    settings = load_settings(environ={"MLCOPILOT_HOME": str(demo["home"])})
    server = build_server(settings)
    told: dict[str, Any] = {}

    async def main() -> None:
        async with create_connected_server_and_client_session(server) as client:
            result = await client.call_tool("explain_incident", {"incident_id": email["id"]})
            assert not result.isError, result.content
            assert result.structuredContent is not None
            told.update(result.structuredContent)

    anyio.run(main)
    assert told["path"] == EMAIL_PATH


def test_without_column_lineage_the_finding_keeps_the_nodes_path(tmp_path: Path) -> None:
    """A dataset-to-dataset edge with no column-level lineage: nothing names the column's way
    (the PII may reach the model), so the finding shows the walk's path, as before."""
    metadata = write_metadata_file(
        tmp_path / "meta.json",
        [
            *dataset("raw.people", fields=[("email", "string")], field_tags={"email": ["PII"]}),
            *dataset("curated.people", fields=[("id", "string")], upstreams=["raw.people"]),
            *ml_model("m", training_data=["curated.people"]),
        ],
    )
    home = tmp_path / "home"
    assert run_cli(home, "catalog", "load", str(metadata)).code == 0
    ran = run_cli(home, "scan", "--now", DAY1, "--format", "json")
    (finding,) = [
        f for f in json.loads(ran.stdout)["models"][0]["findings"] if f["field"] == "email"
    ]
    assert [u.split(",")[1] for u in finding["path"][1:]] == ["curated.people", "raw.people"]
