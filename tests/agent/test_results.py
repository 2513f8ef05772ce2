"""The MCP answers are made of the JSON report's models, so the two say the same.

The report's models (``mlcopilot.report.models``) describe a finding, a coverage gap and a
reason the gate failed once; the MCP tools' output schemas are derived from them. Checked two
ways: the published ``outputSchema`` of ``scan_model`` has the report schema's own properties,
and on the demo a finding's MCP answer and its JSON report entry agree key by key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession

from mlcopilot.agent.results import FindingOut, GapOut, ReasonOut, ScanAnswer
from mlcopilot.catalog.lite import open_lite_catalog
from mlcopilot.checks import load_checks
from mlcopilot.report.json import report_dict
from mlcopilot.report.models import FindingFacts, Gap, GateFailure, report_json_schema
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store import default_state_url, open_store
from tests.agent.conftest import MODEL, NOW, Connected

SHARED = ["check", "severity", "entity", "field", "change", "previous_field", "message", "path"]
"""The keys a finding has in both: the report's ``id`` is the answer's ``incident_id``."""


def _untitled(schema: Any) -> Any:
    """A JSON Schema without the titles FastMCP's generator adds to every property."""
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


def test_the_answers_subclass_the_report_models() -> None:
    assert issubclass(FindingOut, FindingFacts)
    assert issubclass(GapOut, Gap)
    assert issubclass(ReasonOut, GateFailure)


def test_the_output_schema_has_the_report_schemas_properties(
    connect: Callable[..., Connected],
) -> None:
    report = report_json_schema()["$defs"]
    published: dict[str, Any] = {}

    async def conversation(client: ClientSession) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        schema = tools["scan_model"].outputSchema
        assert schema is not None
        published.update(schema)

    connect().run(conversation)
    assert published == ScanAnswer.model_json_schema()  # FastMCP publishes the model's schema
    defs = published["$defs"]
    finding = defs["FindingOut"]["properties"]
    for key in [*SHARED, "evidence"]:
        assert _untitled(finding[key]) == report["Finding"]["properties"][key], key
    assert (
        _untitled(finding["incident_id"])["pattern"]
        == report["Finding"]["properties"]["id"]["pattern"]
    )
    assert defs["Severity"] == report["Severity"]
    assert _untitled(defs["GapOut"]["properties"]) == report["Gap"]["properties"]
    reasons = _untitled(defs["ReasonOut"]["properties"])
    assert "model" not in reasons  # an answer is about one model
    assert reasons == {k: v for k, v in report["GateFailure"]["properties"].items() if k != "model"}


def test_a_findings_answer_and_its_report_entry_agree(
    connect: Callable[..., Connected], demo_home: Path
) -> None:
    answers: list[dict[str, Any]] = []

    async def conversation(client: ClientSession) -> None:
        result = await client.call_tool("scan_model", {"model": MODEL})
        assert not result.isError, result.content
        assert result.structuredContent is not None
        answers.append(result.structuredContent)

    connect().run(conversation)
    (answer,) = answers
    # The same dry run, in-process, as the JSON report has it.
    catalog = open_lite_catalog(demo_home / "catalog.db", create=False)
    store = open_store(default_state_url(demo_home), read_only=True)
    try:
        options = ScanOptions(now=NOW, models=[MODEL], dry_run=True)
        report = report_dict(scan(catalog, store, load_checks(), options))
    finally:
        store.close()
        catalog.close()
    (model,) = report["models"]
    by_id = {f["id"]: f for f in model["findings"]}
    assert {f["incident_id"] for f in answer["findings"]} == set(by_id)
    for found in answer["findings"]:
        entry = by_id[found["incident_id"]]
        assert {key: found[key] for key in SHARED} == {key: entry[key] for key in SHARED}
        assert found["evidence"] == entry["evidence"]
        state = "new" if entry["incident"]["new"] else entry["incident"]["state"]
        assert found["incident_state"] == state
    assert answer["coverage_gaps"] == model["coverage"]["gaps"]
