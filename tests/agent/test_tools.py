"""The MCP server in-process, through the SDK's connected client and server session.

Everything goes the way a client's request goes: JSON-RPC over memory streams, FastMCP's
argument validation, the tool, the structured result checked against its outputSchema.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import CallToolResult, TextContent, TextResourceContents
from pydantic import AnyUrl

from mlcopilot.agent.server import _run, build_server
from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.writeback import incident_document
from mlcopilot.settings import load_settings
from mlcopilot.store import default_state_url, open_store
from testing.fakes.github import FakeGitHub
from testing.notify_world import notify_env
from tests.agent.conftest import CUSTOMERS, MODEL, NOW, UI, Connected

READS = {"scan_model", "list_incidents", "explain_incident", "impact_of_change"}


def _structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def _error(result: CallToolResult) -> str:
    assert result.isError
    (content,) = result.content
    assert isinstance(content, TextContent)
    return content.text


def _drift(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The schema drift findings of a scan answer, by field."""
    return {f["field"]: f for f in answer["findings"] if f["check"] == "schema_drift"}


def _hashes(home: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.iterdir())
        if p.is_file()
    }


def test_a_read_only_server_lists_only_read_only_tools_each_with_schemas(
    connect: Callable[..., Connected],
) -> None:
    async def conversation(client: ClientSession) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == READS  # acknowledge_incident is not there at all
        for tool in tools.values():
            assert len(tool.description or "") > 60, tool.name
            assert tool.annotations is not None
            assert tool.annotations.readOnlyHint is True
            assert tool.outputSchema is not None
            assert tool.outputSchema["type"] == "object"
            for name, schema in tool.inputSchema["properties"].items():
                assert schema.get("description"), (tool.name, name)
        scan = tools["scan_model"]
        assert "Refused here" in scan.inputSchema["properties"]["write"]["description"]
        assert scan.inputSchema["required"] == ["model"]
        assert scan.outputSchema is not None
        assert "verdict" in scan.outputSchema["properties"]

    connect().run(conversation)


def test_with_writes_allowed_the_writing_tools_say_so(connect: Callable[..., Connected]) -> None:
    async def conversation(client: ClientSession) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == READS | {"acknowledge_incident"}
        ack = tools["acknowledge_incident"]
        assert ack.annotations is not None
        assert ack.annotations.readOnlyHint is False
        assert set(ack.inputSchema["required"]) == {"incident_id", "by"}
        scan = tools["scan_model"]
        assert scan.annotations is not None
        assert scan.annotations.readOnlyHint is False
        assert "write" in scan.inputSchema["properties"]
        for name in READS - {"scan_model"}:
            annotations = tools[name].annotations
            assert annotations is not None
            assert annotations.readOnlyHint is True

    connect(allow_writes=True).run(conversation)


def test_scan_model_by_name_finds_the_demos_drift_with_its_path_and_verdict(
    connect: Callable[..., Connected],
) -> None:
    async def conversation(client: ClientSession) -> None:
        answer = _structured(await client.call_tool("scan_model", {"model": "churn_predictor_v1"}))
        assert answer["model"] == MODEL
        assert answer["dry_run"] is True
        assert answer["scanned_at"] == "2026-11-22T09:00:00Z"
        drift = _drift(answer)
        removed = drift["signup_date"]
        assert removed["entity"] == CUSTOMERS
        assert removed["change"] == "removed"
        assert removed["severity"] == "critical"
        assert removed["path"][0] == MODEL
        assert removed["path"][-1] == CUSTOMERS
        assert "urn:li:mlFeature:(churn_features,tenure_days)" in removed["path"]
        assert removed["incident_state"] == "open"  # the second scan opened it
        assert "baseline accept" in removed["action"]
        assert removed["why"]
        renamed = drift["country_code"]
        assert (renamed["change"], renamed["previous_field"]) == ("renamed", "country")
        checks = {f["check"] for f in answer["findings"]}
        assert {"pii_exposure", "stale_source", "deprecated_source"} <= checks
        verdict = answer["verdict"]
        assert verdict["safe"] is False
        assert verdict["fail_on"] == "high"
        (reason,) = verdict["reasons"]
        assert reason["rule"] == "severity"
        assert removed["incident_id"] in reason["incidents"]
        assert answer["coverage_gaps"] == []
        assert answer["truncated"] is False
        # Only a critical finding fails a gate at critical: the removed column, not the rename.
        critical = _structured(
            await client.call_tool("scan_model", {"model": MODEL, "fail_on": "critical"})
        )
        assert critical["verdict"]["reasons"][0]["incidents"] == [removed["incident_id"]]

    connect().run(conversation)


def test_unknown_models_and_bad_arguments_are_one_sentence_tool_errors(
    connect: Callable[..., Connected],
) -> None:
    async def conversation(client: ClientSession) -> None:
        text = _error(await client.call_tool("scan_model", {"model": "churn_predictor"}))
        assert "churn_predictor: no model of that name" in text
        assert "did you mean churn_predictor_v1?" in text
        assert "--model" not in text
        assert "Traceback" not in text
        assert "\n" not in text
        text = _error(await client.call_tool("scan_model", {"model": "m", "fail_on": "severe"}))
        assert "fail_on" in text
        text = _error(
            await client.call_tool("explain_incident", {"incident_id": "0123456789abcdef"})
        )
        assert "no incident '0123456789abcdef'" in text
        assert "list_incidents" in text
        text = _error(await client.call_tool("acknowledge_incident", {"incident_id": "x"}))
        assert "Unknown tool" in text

    connect().run(conversation)


def test_a_dry_run_scan_writes_nothing_to_the_store_or_the_catalog(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    before = _hashes(demo_home)
    assert {"catalog.db", "state.db"} <= set(before)

    async def conversation(client: ClientSession) -> None:
        answer = _structured(await client.call_tool("scan_model", {"model": MODEL}))
        assert answer["dry_run"] is True
        assert answer["findings"]
        # Even with writes allowed, a call that does not ask to write is a dry run.
        again = _structured(await client.call_tool("scan_model", {"model": MODEL}))
        assert again["dry_run"] is True

    connect().run(conversation)
    connect(allow_writes=True).run(conversation)
    assert _hashes(demo_home) == before
    store = open_store(default_state_url(demo_home), read_only=True)
    try:
        last = store.last_scan_at()
        assert last is not None
        assert last < NOW
    finally:
        store.close()


def test_a_dry_run_calls_no_sink_even_when_github_is_configured(demo_home: Path) -> None:
    github = FakeGitHub()
    with github.running():
        env = notify_env(github, MLCOPILOT_TEST_WRITE_SPACING="0")
        server = Connected(demo_home, allow_writes=True, env=env)

        async def conversation(client: ClientSession) -> None:
            answer = _structured(await client.call_tool("scan_model", {"model": MODEL}))
            assert answer["dry_run"] is True
            assert answer["findings"]

        server.run(conversation)
    assert github.requests == []


def test_write_is_refused_by_a_read_only_server_and_records_with_allow_writes(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    async def refused(client: ClientSession) -> None:
        text = _error(await client.call_tool("scan_model", {"model": MODEL, "write": True}))
        assert "write=True needs the server started with `mlcopilot mcp --allow-writes`" in text

    async def recorded(client: ClientSession) -> None:
        answer = _structured(await client.call_tool("scan_model", {"model": MODEL, "write": True}))
        assert answer["dry_run"] is False
        assert answer["outbox_rows"] >= 1  # the write-back, left for the relay

    before = _hashes(demo_home)
    connect().run(refused)
    assert _hashes(demo_home) == before
    connect(allow_writes=True).run(recorded)
    store = open_store(default_state_url(demo_home), read_only=True)
    try:
        assert store.last_scan_at() == NOW
    finally:
        store.close()


def test_list_incidents_by_state_and_model(connect: Callable[..., Connected]) -> None:
    async def conversation(client: ClientSession) -> None:
        listed = _structured(await client.call_tool("list_incidents", {}))["incidents"]
        assert listed
        assert all(i["state"] == "open" for i in listed)
        assert {"signup_date", "country_code"} <= {i["field"] for i in listed}
        by_name = _structured(
            await client.call_tool("list_incidents", {"model": "churn_predictor_v1"})
        )
        assert by_name["incidents"] == listed
        # A model the catalog holds and no incident names, and one nobody knows (issue 25).
        unknown = _error(await client.call_tool("list_incidents", {"model": "churn_predictor"}))
        assert unknown.startswith("churn_predictor: no model of that name in lite:")
        assert unknown.endswith("did you mean churn_predictor_v1?")
        cased = await client.call_tool("list_incidents", {"model": "Churn_Predictor_V1"})
        assert _structured(cased)["incidents"] == listed
        acknowledged = _structured(
            await client.call_tool("list_incidents", {"state": "acknowledged"})
        )
        assert acknowledged["incidents"] == []
        everything = _structured(await client.call_tool("list_incidents", {"state": "all"}))
        assert len(everything["incidents"]) >= len(listed)
        newest = _structured(await client.call_tool("list_incidents", {"limit": 1}))
        assert newest["incidents"] == listed[:1]
        assert newest["total"] == len(listed) > 1
        assert "limit" in _error(await client.call_tool("list_incidents", {"limit": 0}))

    connect().run(conversation)


def test_explain_incident_says_what_changed_where_why_and_links_its_issue(
    connect: Callable[..., Connected],
) -> None:
    async def conversation(client: ClientSession) -> None:
        answer = _structured(await client.call_tool("scan_model", {"model": MODEL}))
        removed = _drift(answer)["signup_date"]
        told = _structured(
            await client.call_tool("explain_incident", {"incident_id": removed["incident_id"]})
        )
        assert told["what_changed"] == removed["message"]
        assert told["path"] == removed["path"]
        assert told["evidence"]["baseline_native_type"] == "date"
        assert told["suggested_action"] == removed["action"]
        assert (told["entity"], told["field"], told["change"]) == (
            CUSTOMERS,
            "signup_date",
            "removed",
        )
        assert told["state"] == "open"
        assert told["opened_at"] == "2026-11-21T09:00:00Z"
        links = told["links"]
        assert links["resource"] == f"mlcopilot://incident/{removed['incident_id']}"
        assert links["datahub_entity"].startswith(f"{UI}/dataset/urn%3Ali%3Adataset%3A")
        assert links["datahub_model"].startswith(f"{UI}/mlModels/")
        assert links["datahub_incident"] == f"urn:li:incident:mlcopilot-{removed['incident_id']}-1"
        assert links["written_back"] is True  # the relay delivered the second scan's write-back
        # The fake GitHub opened one issue per group; this incident's is remembered.
        assert links["github_issue"].startswith("https://github.com/acme/")
        assert links["slack_thread"] is None  # no Slack configured

    connect().run(conversation)


def test_the_incident_resource_is_the_write_backs_document(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    store = open_store(default_state_url(demo_home), read_only=True)
    try:
        incident = next(i for i in store.incidents() if i.field == "signup_date")
    finally:
        store.close()
    expected = incident_document(incident, builtin_infos()[incident.check])

    async def conversation(client: ClientSession) -> None:
        templates = (await client.list_resource_templates()).resourceTemplates
        assert [t.uriTemplate for t in templates] == ["mlcopilot://incident/{incident_id}"]
        assert templates[0].mimeType == "text/markdown"
        read = await client.read_resource(AnyUrl(f"mlcopilot://incident/{incident.id}"))
        (content,) = read.contents
        assert isinstance(content, TextResourceContents)
        assert content.text == expected
        assert "## What changed" in content.text
        assert "## Suggested action" in content.text

    connect().run(conversation)


def test_acknowledge_incident_records_who_once(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    async def conversation(client: ClientSession) -> None:
        listed = _structured(await client.call_tool("list_incidents", {}))["incidents"]
        target = next(i for i in listed if i["field"] == "signup_date")["incident_id"]
        done = _structured(
            await client.call_tool("acknowledge_incident", {"incident_id": target, "by": "alice"})
        )
        assert done == {
            "incident_id": target,
            "state": "acknowledged",
            "acknowledged_by": "alice",
            "acknowledged_at": "2026-11-22T09:00:00Z",
            "already": False,
        }
        again = _structured(
            await client.call_tool("acknowledge_incident", {"incident_id": target, "by": "bob"})
        )
        assert again["already"] is True
        assert again["acknowledged_by"] == "alice"
        acked = _structured(await client.call_tool("list_incidents", {"state": "acknowledged"}))
        assert [i["incident_id"] for i in acked["incidents"]] == [target]
        text = _error(
            await client.call_tool("acknowledge_incident", {"incident_id": target, "by": "  "})
        )
        assert "by is empty" in text

    connect(allow_writes=True).run(conversation)
    store = open_store(default_state_url(demo_home), read_only=True)
    try:
        acked = [i for i in store.incidents() if i.acknowledged_by]
    finally:
        store.close()
    assert [(i.field, i.acknowledged_by) for i in acked] == [("signup_date", "alice")]


def test_impact_of_change_names_the_models_a_change_would_break_and_writes_nothing(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    before = _hashes(demo_home)

    async def conversation(client: ClientSession) -> None:
        answer = _structured(
            await client.call_tool(
                "impact_of_change", {"dataset": "raw.customers", "drop": ["email"]}
            )
        )
        assert answer["dataset"] == CUSTOMERS
        assert answer["changes"] == ["drop email"]
        assert answer["affected_models"] == [MODEL]
        assert answer["worst"] == "critical"
        (model,) = answer["models"]
        (finding,) = model["findings"]
        assert (finding["field"], finding["change"]) == ("email", "removed")
        assert finding["incident_state"] == "new"
        # Already-open drift (signup_date) is not the change's doing: not counted again.
        assert model["fields"] == ["email"]
        text = _error(
            await client.call_tool("impact_of_change", {"dataset": "raw.customerz", "drop": ["x"]})
        )
        assert "did you mean raw.customers" in text
        text = _error(await client.call_tool("impact_of_change", {"dataset": "raw.customers"}))
        assert "no change to preview" in text
        text = _error(
            await client.call_tool(
                "impact_of_change", {"dataset": "raw.customers", "rename": {"email": "email"}}
            )
        )
        assert "the old and the new name are the same" in text
        assert "--rename" not in text

    connect().run(conversation)
    assert _hashes(demo_home) == before


def test_a_missing_catalog_or_state_database_is_one_sentence(tmp_path: Path) -> None:
    empty = Connected(tmp_path / "nothing-here")

    async def conversation(client: ClientSession) -> None:
        for tool, arguments in (
            ("scan_model", {"model": "churn_predictor_v1"}),
            ("list_incidents", {}),
            ("explain_incident", {"incident_id": "0123456789abcdef"}),
        ):
            text = _error(await client.call_tool(tool, arguments))
            assert "\n" not in text, tool
            assert "Traceback" not in text, tool
            assert "nothing-here" in text, tool  # it says where it looked

    empty.run(conversation)
    assert not (tmp_path / "nothing-here").exists()  # and created nothing there


def test_a_damaged_state_database_is_one_sentence_naming_it(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    (demo_home / "state.db").write_bytes(b"not a database" * 100)

    async def conversation(client: ClientSession) -> None:
        text = _error(await client.call_tool("list_incidents", {}))
        assert "Traceback" not in text
        assert "\n" not in text
        assert "state.db" in text

    connect().run(conversation)


def test_a_bug_reaches_the_client_as_one_line_and_the_log_gets_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken() -> str:
        def fails() -> str:
            raise KeyError("detail of the bug")

        return await _run(fails)

    server = build_server(load_settings(environ={}))
    server.add_tool(broken, name="broken", description="Always fails.")

    async def main() -> None:
        async with create_connected_server_and_client_session(server) as client:
            text = _error(await client.call_tool("broken", {}))
            assert text.endswith(
                "internal error (KeyError); the mlcopilot server's log has the details"
            )
            assert "detail of the bug" not in text

    with caplog.at_level(logging.ERROR, logger="mlcopilot.agent.server"):
        anyio.run(main)
    assert "Traceback" in caplog.text
    assert "detail of the bug" in caplog.text


# --- one sentence, the CLI's ids and names, our own version (issue 25, item 12)


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("scan_model", {"model": "m", "fail_on": "severe"}, "fail_on: Input should be"),
        ("scan_model", {}, "model is required"),
        ("scan_model", {"model": 42}, "model: Input should be a valid string (got 42)"),
        ("list_incidents", {"state": "bogus"}, "state: Input should be 'open'"),
        ("list_incidents", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ],
)
def test_arguments_the_tool_refuses_are_one_sentence_without_pydantics_text(
    connect: Callable[..., Connected], tool: str, arguments: dict[str, Any], said: str
) -> None:
    async def conversation(client: ClientSession) -> None:
        text = _error(await client.call_tool(tool, arguments))
        assert text.startswith(said), text
        assert "pydantic" not in text
        assert "validation error" not in text
        assert "\n" not in text

    connect().run(conversation)


def test_incident_ids_are_taken_by_the_prefixes_the_cli_takes(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    from mlcopilot.cli.incidents import MIN_PREFIX as CLI_PREFIX
    from mlcopilot.incidents.ids import MIN_PREFIX

    assert MIN_PREFIX == CLI_PREFIX == 6
    store = open_store(default_state_url(demo_home), read_only=True)
    try:
        incident = next(i for i in store.incidents() if i.field == "signup_date")
    finally:
        store.close()

    async def conversation(client: ClientSession) -> None:
        for given in (incident.id[:6], incident.id[:10].upper(), f" {incident.id} "):
            told = _structured(await client.call_tool("explain_incident", {"incident_id": given}))
            assert told["incident_id"] == incident.id, given
        short = _error(await client.call_tool("explain_incident", {"incident_id": incident.id[:5]}))
        assert "at least 6 of its first characters" in short
        read = await client.read_resource(AnyUrl(f"mlcopilot://incident/{incident.id[:6]}"))
        (content,) = read.contents
        assert isinstance(content, TextResourceContents)
        assert "## What changed" in content.text

    connect().run(conversation)


def test_a_resource_error_is_said_once(connect: Callable[..., Connected]) -> None:
    async def conversation(client: ClientSession) -> None:
        with pytest.raises(McpError) as raised:
            await client.read_resource(AnyUrl("mlcopilot://incident/nope"))
        message = raised.value.error.message
        assert "Error creating resource" not in message
        assert message.startswith("no incident 'nope'")

    connect().run(conversation)


def test_the_server_announces_mlcopilots_version(connect: Callable[..., Connected]) -> None:
    import mlcopilot

    server = build_server(load_settings(environ={}))

    async def main() -> None:
        async with create_connected_server_and_client_session(server) as client:
            init = await client.initialize()
            assert init.serverInfo.name == "mlcopilot"
            assert init.serverInfo.version == mlcopilot.__version__

    anyio.run(main)


def test_a_client_that_hangs_up_is_not_logged_as_an_error() -> None:
    """The SDK logs a closed event stream as an error with a traceback: a DEBUG line here."""
    import anyio as real_anyio

    from mlcopilot.agent.http import ClientGone

    def record(error: BaseException) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            import sys

            return logging.LogRecord(
                "mcp.server.streamable_http",
                logging.ERROR,
                __file__,
                1,
                "Error in standalone SSE writer",
                None,
                sys.exc_info(),
            )

    gone = record(real_anyio.ClosedResourceError())
    assert ClientGone().filter(gone)
    assert (gone.levelno, gone.exc_info) == (logging.DEBUG, None)
    assert gone.getMessage() == "Error in standalone SSE writer: the client disconnected"
    failed = record(KeyError("a real failure"))
    assert ClientGone().filter(failed)
    assert failed.levelno == logging.ERROR
    assert failed.exc_info is not None
