"""A scripted agent asks what an agent would: is churn_predictor safe to retrain, why not, and
what would a further change upstream break? Each step reads only the previous answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import ClientSession
from mcp.types import CallToolResult

from tests.agent.conftest import CUSTOMERS, MODEL, Connected


def _answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def test_list_tools_scan_explain_and_preview_an_upstream_change(
    connect: Callable[..., Connected],
) -> None:
    async def agent(client: ClientSession) -> None:
        # (The connected session has initialized.) 1. What can this server do?
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"scan_model", "explain_incident", "impact_of_change"} <= set(tools)

        # 2. "Is churn_predictor_v1 safe to retrain?"
        scan = _answer(await client.call_tool("scan_model", {"model": "churn_predictor_v1"}))
        assert scan["verdict"]["safe"] is False
        worst = scan["findings"][0]  # most severe first
        assert worst["check"] == "schema_drift"
        assert worst["severity"] == "critical"
        assert (worst["entity"], worst["field"], worst["change"]) == (
            CUSTOMERS,
            "signup_date",
            "removed",
        )
        assert worst["incident_id"] in scan["verdict"]["reasons"][0]["incidents"]
        renamed = next(f for f in scan["findings"] if f["field"] == "country_code")
        assert renamed["previous_field"] == "country"

        # 3. "Why? What changed, and how does it reach the model?"
        told = _answer(
            await client.call_tool("explain_incident", {"incident_id": worst["incident_id"]})
        )
        assert told["path"] == [
            MODEL,
            "urn:li:mlFeature:(churn_features,tenure_days)",
            CUSTOMERS,
        ]
        assert "signup_date" in told["what_changed"]
        assert "baseline accept" in told["suggested_action"]
        assert told["links"]["github_issue"] is not None

        # 4. "The upstream team also plans to drop email from that table: what breaks?"
        impact = _answer(
            await client.call_tool(
                "impact_of_change", {"dataset": worst["entity"], "drop": ["email"]}
            )
        )
        assert impact["affected_models"] == [MODEL]
        (model,) = impact["models"]
        assert model["severity"] == "critical"
        assert [f["field"] for f in model["findings"]] == ["email"]
        assert model["findings"][0]["path"][-1] == CUSTOMERS

    connect().run(agent)
