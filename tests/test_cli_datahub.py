"""The command line against a DataHub server (the stand-in): scan, setup and doctor."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from standin.fixtures import StandInFactory
from testing.installed_cli import Ran, run_cli
from tests.conftest import DEMO_DATA

SECRET = "tok-canary-5f1e0c"


def demo_records(*names: str) -> list[dict[str, Any]]:
    return [r for n in names for r in json.loads((DEMO_DATA / n).read_text(encoding="utf-8"))]


def run(tmp_path: Path, *args: str, token: str | None = None, **extra: str) -> Ran:
    # The guard rails (tests/conftest.py) have taken DATAHUB_GMS_TOKEN out of the environment.
    env = {**extra, **({"DATAHUB_GMS_TOKEN": token} if token is not None else {})}
    return run_cli(tmp_path / "home", *args, env=env, columns=200)


def findings(report: dict[str, Any]) -> set[tuple[str, str, str | None, str]]:
    return {
        (f["check"], f["entity"], f["field"], f["severity"])
        for m in report["models"]
        for f in m["findings"]
    }


def test_scan_through_datahub_finds_what_lite_finds(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    through_server = run(
        tmp_path / "a", "scan", "--catalog", f"datahub:{server.url}", "--now",
        "2026-11-20T09:00:00Z", "--format", "json",
    )  # fmt: skip
    assert through_server.returncode == 0, through_server.stderr
    assert (
        run(tmp_path / "b", "catalog", "load", str(DEMO_DATA / "01_catalog.json")).returncode == 0
    )
    embedded = run(tmp_path / "b", "scan", "--now", "2026-11-20T09:00:00Z", "--format", "json")
    assert embedded.returncode == 0, embedded.stderr
    remote, local = json.loads(through_server.stdout), json.loads(embedded.stdout)
    assert findings(remote) == findings(local)
    assert remote["models"][0]["coverage"]["nodes"] == local["models"][0]["coverage"]["nodes"]
    # The write-back landed on the server: its native incidents are in the server's catalog.
    db = sqlite3.connect(server.lite_path)
    stored = db.execute(
        "select count(distinct urn) from metadata_aspect_v2 "
        "where aspect_name = 'incidentInfo' and urn like 'urn:li:incident:mlcopilot-%'"
    ).fetchone()[0]
    assert stored == len(remote["incidents"]["opened"]) == 3


def test_setup_is_idempotent(standin_factory: StandInFactory, tmp_path: Path) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    first = run(tmp_path, "datahub", "setup", "--catalog", f"datahub:{server.url}")
    assert first.returncode == 0, first.stderr
    assert "created 11" in first.stdout  # a tag per built-in check, 4 structured properties
    second = run(tmp_path, "datahub", "setup", "--catalog", f"datahub:{server.url}")
    assert second.returncode == 0, second.stderr
    assert "created 0, already there 11" in second.stdout


def test_doctor_passes_on_a_healthy_server(standin_factory: StandInFactory, tmp_path: Path) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    run(tmp_path, "datahub", "setup", "--catalog", f"datahub:{server.url}")
    result = run(tmp_path, "doctor", "--catalog", f"datahub:{server.url}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    assert result.stdout.count("pass") >= 4


def test_doctor_checks_the_notification_settings_a_scan_would_refuse(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    run(tmp_path, "datahub", "setup", "--catalog", f"datahub:{server.url}")
    none = run(tmp_path, "doctor", "--catalog", f"datahub:{server.url}")
    assert "notifications: none configured" in none.stdout, none.stdout
    half = run(
        tmp_path, "doctor", "--catalog", f"datahub:{server.url}", MLCOPILOT_GITHUB_REPO="acme/x"
    )
    assert half.returncode == 1
    assert "FAIL  notifications: MLCOPILOT_GITHUB_REPO is set but no token" in half.stdout
    whole = run(
        tmp_path,
        "doctor",
        "--catalog",
        f"datahub:{server.url}",
        MLCOPILOT_GITHUB_REPO="acme/x",
        GITHUB_TOKEN=SECRET,
    )
    assert whole.returncode == 0, whole.stdout
    assert "notifications: GitHub issues in acme/x" in whole.stdout
    assert SECRET not in whole.stdout + whole.stderr


def test_doctor_names_a_refused_token_without_echoing_it(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(demo_records("01_catalog.json"), token="the-right-one")
    result = run(tmp_path, "doctor", "--catalog", f"datahub:{server.url}", token=SECRET)
    assert result.returncode == 1
    assert "FAIL" in result.stdout
    assert "401" in result.stdout or "token" in result.stdout.lower()
    assert SECRET not in result.stdout + result.stderr


def test_doctor_warns_about_an_old_server(standin_factory: StandInFactory, tmp_path: Path) -> None:
    server = standin_factory(demo_records("01_catalog.json"), version="v1.3.0")
    result = run(tmp_path, "doctor", "--catalog", f"datahub:{server.url}")
    assert "1.3.0" in result.stdout
    assert "warn" in result.stdout or "FAIL" in result.stdout


def test_doctor_and_scan_on_a_server_that_is_down(tmp_path: Path) -> None:
    doctor = run(tmp_path, "doctor", "--catalog", "datahub:http://127.0.0.1:9")
    assert doctor.returncode == 1
    assert "FAIL" in doctor.stdout
    scanned = run(tmp_path, "scan", "--catalog", "datahub:http://127.0.0.1:9", token=SECRET)
    assert scanned.returncode == 3
    assert "127.0.0.1:9" in scanned.stderr
    assert SECRET not in scanned.stderr


@pytest.mark.parametrize("spec", ["mcp:{url}"])
def test_scan_through_the_mcp_server(
    standin_factory: StandInFactory, tmp_path: Path, spec: str
) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    result = run(
        tmp_path, "scan", "--catalog", spec.format(url=server.url), "--now",
        "2026-11-20T09:00:00Z", "--format", "json", token="anything",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    checks = {f[0] for f in findings(json.loads(result.stdout))}
    assert checks == {"pii_exposure", "stale_source", "deprecated_source"}


def test_doctor_checks_the_mcp_server_too(standin_factory: StandInFactory, tmp_path: Path) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    run(tmp_path, "datahub", "setup", "--catalog", f"datahub:{server.url}")
    result = run(tmp_path, "doctor", "--catalog", f"mcp:{server.url}", token="anything")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mcp server: mcp-server-datahub offers all 8 tools" in result.stdout
    old = standin_factory(demo_records("01_catalog.json"), version="v1.3.0")
    result = run(tmp_path, "doctor", "--catalog", f"mcp:{old.url}", token="anything")
    assert result.returncode == 1
    assert "does not offer" in result.stdout


def test_triage_in_datahub_acknowledges_the_incident(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    from datahub.emitter.mcp import MetadataChangeProposalWrapper
    from datahub.metadata.schema_classes import IncidentInfoClass

    server = standin_factory(demo_records("01_catalog.json"))
    catalog = f"datahub:{server.url}"
    first = run(
        tmp_path, "scan", "--catalog", catalog, "--now", "2026-11-20T09:00:00Z", "--format", "json"
    )
    assert first.returncode == 0, first.stderr
    incident_id = json.loads(first.stdout)["incidents"]["opened"][0]
    urn = f"urn:li:incident:mlcopilot-{incident_id}-1"
    row = (
        sqlite3.connect(server.lite_path)
        .execute(
            "select metadata from metadata_aspect_v2 where urn=? and aspect_name='incidentInfo' "
            "and version=0",
            (urn,),
        )
        .fetchone()
    )
    info = json.loads(row[0])
    info["status"]["stage"] = "INVESTIGATION"  # someone picked it up in DataHub's UI
    server.write(
        [MetadataChangeProposalWrapper(entityUrn=urn, aspect=IncidentInfoClass.from_obj(info))]
    )
    second = run(tmp_path, "scan", "--catalog", catalog, "--now", "2026-11-20T10:00:00Z")
    assert second.returncode == 0, second.stderr
    listed = json.loads(run(tmp_path, "incidents", "list", "--format", "json").stdout)
    states = {i["id"]: i["state"] for i in listed}
    assert states[incident_id] == "acknowledged"
    assert sum(s == "acknowledged" for s in states.values()) == 1
