"""``impact`` does not cry wolf on type spellings (issue 25, item 7).

The demo's ``raw.customers`` is a Hive table whose ``customer_id`` was ingested as ``long`` and
whose text columns as ``string``. A dbt manifest spells them ``bigint`` and ``varchar``; a
person may type ``LONG``. None of that is a retype: a pull request that only documents the
columns must pass ``--fail-on high``.
"""

from __future__ import annotations

import json
from pathlib import Path

from testing.installed_cli import Ran, run_cli

NOW = "2026-11-20T09:00:00Z"


def impact(home: Path, *args: str) -> Ran:
    return run_cli(home, "impact", "raw.customers", "--now", NOW, *args)


def manifest(tmp_path: Path, types: dict[str, str]) -> Path:
    """A dbt manifest whose ``raw.customers`` model documents ``types`` (column: data_type)."""
    node = {
        "unique_id": "model.shop.customers",
        "resource_type": "model",
        "database": "warehouse",
        "schema": "raw",
        "alias": "customers",
        "name": "customers",
        "columns": {c: {"name": c, "data_type": t} for c, t in types.items()},
    }
    version = "https://schemas.getdbt.com/dbt/manifest/v12.json"
    path = tmp_path / "manifest.json"
    data = {"metadata": {"dbt_schema_version": version}, "nodes": {"model.shop.customers": node}}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


SPELLED_BY_DBT = {
    "customer_id": "bigint",
    "email": "varchar",
    "signup_date": "DATE",
    "country": "varchar(2)",
    "plan": "STRING",
}


def test_a_manifest_that_only_spells_the_types_its_own_way_changes_nothing(
    demo: Path, tmp_path: Path
) -> None:
    ran = impact(
        demo,
        "--schema-file",
        str(manifest(tmp_path, SPELLED_BY_DBT)),
        "--format",
        "json",
        "--fail-on",
        "high",
    )
    assert ran.code == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    assert report["changes"] == []  # every column kept, none retyped
    assert [m for m in report["models"] if m["affected"]] == []


def test_a_real_retype_in_the_manifest_is_still_one(demo: Path, tmp_path: Path) -> None:
    types = {**SPELLED_BY_DBT, "customer_id": "varchar"}
    ran = impact(demo, "--schema-file", str(manifest(tmp_path, types)), "--format", "json")
    assert ran.code == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert [(c["change"], c["column"], c["new_type"]) for c in report["changes"]] == [
        ("retyped", "customer_id", "varchar")
    ]
    (model,) = [m for m in report["models"] if m["affected"]]
    assert model["severity"] == "high"


def test_retype_to_another_spelling_of_the_type_is_refused_as_no_change(demo: Path) -> None:
    for spelling in ("LONG", "bigint"):
        ran = impact(demo, "--retype", f"customer_id={spelling}")
        assert ran.code == 2, ran.stdout + ran.stderr
        assert ran.stderr.strip() == (
            f"error: retype customer_id to {spelling}: it already is long ({spelling} is "
            "another spelling of it on hive: int64)"
        )
