"""The write-back's incidents name the model where DataHub shows incidents on ML entities.

DataHub PRs #19112 (mlModel, mlFeature) and #19367 (mlFeatureTable) let an incident name ML
entities and list it on their pages; an older GMS refuses an ``incidentInfo`` that names one
(``EntityRegistryUrnValidator``: "is not a valid destination for field path: /entities/*").
Each scan here goes through ``mlcopilot`` as a user runs it, against the stand-in serving
DataHub's real SDL as the old server (its default, as the SDL predates #19112) or the new one
(``ml_incidents=True``), or against a Lite file. What each incident names is read back from
where it was stored, and from GraphQL as DataHub's UI reads it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from datahub.configuration.common import GraphError, OperationalError
from datahub.emitter import mce_builder as mb
from datahub.emitter.mcp import MetadataChangeProposalWrapper as Mcp
from datahub.ingestion.graph.client import DatahubClientConfig, DataHubGraph
from datahub.metadata import schema_classes as sc

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.writeback import ML_INCIDENT_TYPES as ML
from mlcopilot.incidents.writeback import incident_types_of, plan_writeback
from mlcopilot.model import Incident, IncidentState, IncidentWrite, Severity
from standin.fixtures import StandInFactory
from standin.server import StandIn
from testing.installed_cli import Ran, run_cli

RAW = mb.make_dataset_urn("hive", "raw.customers", "PROD")
FEATURE = mb.make_ml_feature_urn("customer_features", "email_domain")
TABLE = mb.make_ml_feature_table_urn("feast", "customer_features")
MODEL = mb.make_ml_model_urn("mlflow", "churn", "PROD")
PII = mb.make_tag_urn("PII")
NOW = "2026-11-20T09:00:00Z"
LATER = "2026-11-20T10:00:00Z"

INCIDENTS_OF = """query($urn: String!) {
  %s(urn: $urn) { incidents(start: 0, count: 50) { total incidents { urn } } }
}"""


def catalog() -> list[Mcp]:
    """A model fed PII three ways: a dataset column, a feature and the feature's table."""
    tagged = sc.GlobalTagsClass([sc.TagAssociationClass(PII)])
    schema = sc.SchemaMetadataClass(
        schemaName="raw.customers",
        platform="urn:li:dataPlatform:hive",
        version=0,
        hash="",
        platformSchema=sc.OtherSchemaClass(rawSchema=""),
        fields=[
            sc.SchemaFieldClass(
                fieldPath=path,
                type=sc.SchemaFieldDataTypeClass(sc.StringTypeClass()),  # type: ignore[no-untyped-call]
                nativeDataType="varchar",
                globalTags=tagged if path == "email" else None,
            )
            for path in ("customer_id", "email")
        ],
    )
    return [
        Mcp(entityUrn=RAW, aspect=sc.DatasetPropertiesClass(name="raw.customers")),
        Mcp(entityUrn=RAW, aspect=schema),
        Mcp(entityUrn=FEATURE, aspect=sc.MLFeaturePropertiesClass(sources=[RAW])),
        Mcp(entityUrn=FEATURE, aspect=tagged),
        Mcp(entityUrn=TABLE, aspect=sc.MLFeatureTablePropertiesClass(mlFeatures=[FEATURE])),
        Mcp(entityUrn=TABLE, aspect=tagged),
        Mcp(entityUrn=MODEL, aspect=sc.MLModelPropertiesClass(name="churn", mlFeatures=[FEATURE])),
        Mcp(entityUrn=PII, aspect=sc.TagPropertiesClass(name="PII")),
    ]


def run(home: Path, *args: str) -> Ran:
    return run_cli(home, *args, columns=200)


def scan(home: Path, spec: str, now: str = NOW) -> dict[str, Any]:
    result = run(home, "scan", "--catalog", spec, "--now", now, "--format", "json")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = result.json()
    return report


def stored_incidents(server: StandIn) -> dict[str, dict[str, Any]]:
    """Every incident the write-back stored on the server, by the entity it is about."""
    found: dict[str, dict[str, Any]] = {}
    for row in server.backend.store.scan_latest():
        if row.name == "incidentInfo" and row.urn.startswith("urn:li:incident:mlcopilot-"):
            found[row.value["entities"][0]] = {"urn": row.urn, **row.value}
    return found


def incident_urns(server: StandIn) -> list[str]:
    return [r.urn for r in server.backend.store.scan_latest() if r.name == "incidentInfo"]


def versions(server: StandIn, urn: str) -> int:
    row = server.backend.store.get(urn, "incidentInfo", 0)
    assert row is not None
    return row.latest_version


def listed(server: StandIn, field: str, urn: str) -> set[str]:
    """The incidents GraphQL lists on an entity (what its page in DataHub shows)."""
    graph = DataHubGraph(DatahubClientConfig(server=server.url))
    try:
        data = graph.execute_graphql(INCIDENTS_OF % field, {"urn": urn})
    finally:
        graph.close()
    return {i["urn"] for i in data[field]["incidents"]["incidents"]}


def doctor_line(home: Path, server: StandIn) -> str:
    result = run(home, "doctor", "--catalog", f"datahub:{server.url}")
    return next(line for line in result.stdout.splitlines() if "incidents on ML entities" in line)


# --- a DataHub with incidents on ML entities (#19112, #19367) ---------------------------------


def test_a_current_datahub_shows_the_incidents_on_the_model(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(catalog(), ml_incidents=True)
    report = scan(tmp_path, f"datahub:{server.url}")
    assert len(report["incidents"]["opened"]) == 3
    stored = stored_incidents(server)
    # Each names the entity it is about, a feature and a feature table included, and the model.
    assert {e: tuple(i["entities"]) for e, i in stored.items()} == {
        RAW: (RAW, MODEL),
        FEATURE: (FEATURE, MODEL),
        TABLE: (TABLE, MODEL),
    }
    assert all("\nModel: " not in i["description"] for i in stored.values())
    # The model's page lists all three; the feature's and the table's their own.
    urns = {e: i["urn"] for e, i in stored.items()}
    assert listed(server, "mlModel", MODEL) == set(urns.values())
    assert listed(server, "mlFeature", FEATURE) == {urns[FEATURE]}
    assert listed(server, "mlFeatureTable", TABLE) == {urns[TABLE]}
    assert listed(server, "dataset", RAW) == {urns[RAW]}
    line = doctor_line(tmp_path, server)
    assert line.startswith("pass")
    assert "supported (mlModel, mlFeature, mlFeatureTable)" in line
    assert "the model's page shows its incidents" in line
    # A rescan writes none of them again.
    before = {urn: versions(server, urn) for urn in urns.values()}
    scan(tmp_path, f"datahub:{server.url}", LATER)
    assert {urn: versions(server, urn) for urn in urns.values()} == before


# --- an older DataHub (the SDL's, the stand-in's default) -------------------------------------


def test_an_older_datahub_gets_incidents_on_the_upstream_entity_only(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(catalog())
    report = scan(tmp_path, f"datahub:{server.url}")
    assert len(report["incidents"]["opened"]) == 3  # found, stored and notified all the same
    stored = stored_incidents(server)
    # The dataset's incident names the dataset only, and its description the model; a feature
    # or a feature table cannot carry an incident there, so theirs are not written.
    assert list(stored) == [RAW]
    assert stored[RAW]["entities"] == [RAW]
    assert f"\nModel: {MODEL}\nContext: urn:li:document:mlcopilot-" in stored[RAW]["description"]
    assert "(model churn)" in stored[RAW]["title"]
    assert listed(server, "dataset", RAW) == {stored[RAW]["urn"]}
    with pytest.raises(GraphError, match="Field 'incidents' in type 'MLModel' is undefined"):
        listed(server, "mlModel", MODEL)
    line = doctor_line(tmp_path, server)
    assert line.startswith("warn")
    assert "not supported by this GMS (before DataHub PR #19112)" in line
    assert "incidents name the upstream entity only" in line
    # A rescan changes nothing (the plan equals what is stored).
    before = versions(server, stored[RAW]["urn"])
    scan(tmp_path, f"datahub:{server.url}", LATER)
    assert versions(server, stored[RAW]["urn"]) == before


def test_an_older_datahub_refuses_an_incident_on_the_model_as_gms_does(
    standin_factory: StandInFactory,
) -> None:
    server = standin_factory(catalog())
    graph = DataHubGraph(DatahubClientConfig(server=server.url))
    info = sc.IncidentInfoClass(
        type="OPERATIONAL",
        entities=[RAW, MODEL],
        status=sc.IncidentStatusClass(
            state="ACTIVE", lastUpdated=sc.AuditStampClass(0, "urn:li:corpuser:x")
        ),
        created=sc.AuditStampClass(0, "urn:li:corpuser:x"),
    )
    try:
        with pytest.raises(OperationalError) as refused:
            graph.emit_mcps([Mcp(entityUrn="urn:li:incident:by-hand", aspect=info)])
        assert refused.value.info.get("status") == 422
        assert "is not a valid destination for field path: /entities/*" in str(refused.value)
        raise_it = "mutation($i: RaiseIncidentInput!) { raiseIncident(input: $i) }"
        with pytest.raises(GraphError, match="not a valid destination"):
            graph.execute_graphql(
                raise_it, {"i": {"type": "OPERATIONAL", "resourceUrns": [RAW, MODEL]}}
            )
    finally:
        graph.close()
    assert incident_urns(server) == []  # nothing of either written


def test_an_upgrade_names_the_model_once_and_then_leaves_the_incidents_alone(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(catalog())
    scan(tmp_path, f"datahub:{server.url}")
    (old,) = stored_incidents(server).values()
    server.ml_incidents = True  # GMS upgraded past #19112 and #19367
    scan(tmp_path, f"datahub:{server.url}", LATER)
    stored = stored_incidents(server)
    assert stored[RAW]["urn"] == old["urn"]
    assert stored[RAW]["entities"] == [RAW, MODEL]
    assert "\nModel: " not in stored[RAW]["description"]
    assert set(stored) == {RAW, FEATURE, TABLE}
    assert listed(server, "mlModel", MODEL) == {i["urn"] for i in stored.values()}
    before = {i["urn"]: versions(server, i["urn"]) for i in stored.values()}
    scan(tmp_path, f"datahub:{server.url}", "2026-11-20T11:00:00Z")
    assert {urn: versions(server, urn) for urn in before} == before


def test_a_datahub_that_cannot_be_asked_gets_incidents_on_the_upstream_entity_only(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(catalog(), ml_incidents=True)
    # Introspection refused (GRAPHQL_QUERY_INTROSPECTION_ENABLED=false answers an error too).
    server.inject("mlcopilotIncidentTypes", status=400)
    scan(tmp_path, f"datahub:{server.url}")
    stored = stored_incidents(server)
    assert list(stored) == [RAW]
    assert stored[RAW]["entities"] == [RAW]
    line = doctor_line(tmp_path, server)
    assert line.startswith("warn")
    assert "cannot tell" in line


def test_a_resolution_by_hand_on_an_older_datahub_does_not_fail(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(catalog())
    report = scan(tmp_path, f"datahub:{server.url}")
    (incident,) = stored_incidents(server).values()
    incident_id = incident["urn"].removeprefix("urn:li:incident:mlcopilot-").rsplit("-", 1)[0]
    assert incident_id in report["incidents"]["opened"]
    # Planned without asking the server: the catalog still leaves out what GMS would refuse.
    spec = f"datahub:{server.url}"
    resolved = run(tmp_path, "incidents", "resolve", incident_id, "--catalog", spec)
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    info = stored_incidents(server)[RAW]
    assert info["status"]["state"] == "RESOLVED"
    assert info["entities"] == [RAW]


# --- Lite ------------------------------------------------------------------------------------


def test_lite_names_the_model_as_before(tmp_path: Path) -> None:
    source = tmp_path / "catalog.json"
    source.write_text(json.dumps([m.to_obj() for m in catalog()]), encoding="utf-8")
    home = tmp_path / "home"
    assert run(home, "catalog", "load", str(source)).returncode == 0
    report = scan(home, "lite:" + str(home / "catalog.db"))
    assert len(report["incidents"]["opened"]) == 3
    db = sqlite3.connect(home / "catalog.db")
    try:
        rows = db.execute(
            "SELECT metadata FROM metadata_aspect_v2 WHERE aspect_name = 'incidentInfo' "
            "AND version = 0 AND urn LIKE 'urn:li:incident:mlcopilot-%'"
        ).fetchall()
    finally:
        db.close()
    entities = {tuple(json.loads(m)["entities"]) for (m,) in rows}
    assert entities == {(RAW, MODEL), (FEATURE, MODEL), (TABLE, MODEL)}


# --- the plan itself -------------------------------------------------------------------------

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def incident(entity: str, id: str) -> Incident:
    return Incident(
        id=id,
        generation=1,
        state=IncidentState.OPEN,
        check="pii_exposure",
        severity=Severity.HIGH,
        model=MODEL,
        entity=entity,
        field=None,
        change=None,
        previous_field=None,
        message="tagged PII and upstream of the model",
        path=(MODEL, entity),
        evidence={},
        opened_at=T0,
        updated_at=T0,
        resolved_at=None,
    )


def planned(types: Sequence[str] | None) -> Mapping[str, IncidentWrite]:
    """The incident writes planned for an incident at RAW and one at FEATURE, by entity."""
    incidents = [incident(RAW, "aaaa"), incident(FEATURE, "bbbb")]
    plan = plan_writeback(
        incidents,
        models=[MODEL],
        everything=incidents,
        infos=builtin_infos(),
        incident_types=None if types is None else frozenset(types),
    )
    by_urn = {RAW: "urn:li:incident:mlcopilot-aaaa-1", FEATURE: "urn:li:incident:mlcopilot-bbbb-1"}
    writes = {w.urn: w for w in plan if isinstance(w, IncidentWrite)}
    return {entity: writes[urn] for entity, urn in by_urn.items() if urn in writes}


def test_the_plan_names_what_the_catalog_accepts_and_says_the_rest() -> None:
    # A catalog that does not say: today's incidents, byte for byte.
    unsaid = planned(None)
    assert unsaid[RAW].entities == (RAW, MODEL)
    assert unsaid[RAW].description == (
        "tagged PII and upstream of the model\n\nContext: urn:li:document:mlcopilot-aaaa-1"
    )
    assert planned(["dataset", "mlModel", "mlFeature"]) == unsaid  # all accepted: the same
    # The model not accepted: the incident on the dataset says the model in its description.
    old = planned(["dataset"])
    assert old[RAW].entities == (RAW,)
    assert old[RAW].description == (
        "tagged PII and upstream of the model\n\n"
        f"Model: {MODEL}\nContext: urn:li:document:mlcopilot-aaaa-1"
    )
    assert FEATURE not in old  # naming nothing it accepts: not written
    # The model accepted but not the affected entity: the model carries it.
    only_model = planned(["mlModel"])
    assert only_model[FEATURE].entities == (MODEL,)
    assert f"\n\nEntity: {FEATURE}\nContext: " in only_model[FEATURE].description


def test_the_datahub_catalog_says_what_it_accepts(
    standin_factory: StandInFactory,
) -> None:
    old = standin_factory(catalog())
    new = standin_factory(catalog(), ml_incidents=True)
    every = {"dataset", "chart", "dashboard", "dataFlow", "dataJob", "schemaField"}
    with DataHubCatalog(old.url) as before, DataHubCatalog(new.url) as after:
        assert incident_types_of(before) == frozenset(every)
        assert incident_types_of(after) == frozenset(every | set(ML))
        asked = len(new.requests)
        assert after.incident_support().ml_types == ("mlModel", "mlFeature", "mlFeatureTable")
        assert len(new.requests) == asked  # asked once per catalog
