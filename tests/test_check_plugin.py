"""A third-party check, installed as a real package, works end to end (examples/check-plugin).

The example package is built and installed offline (``pip install --no-deps
--no-build-isolation``) in the two ways users do: into its own virtual environment, and with
``pip install --target DIR`` plus ``DIR`` on ``PYTHONPATH``. ``mlcopilot`` then runs as a
subprocess of that environment: nothing in this process imports the plugin, so it is found
only through its ``mlcopilot.checks`` entry point. A whole scan must then yield its finding,
its incident and its own tag in DataHub, and GitHub and Slack (local fakes) must receive its
title, wording and advice.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import OwnerClass, OwnershipClass, OwnershipTypeClass

from mlcopilot.model import CheckInfo
from testing.builders import (
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
    model_urn,
    write_metadata_file,
)
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.notify_world import notify_env
from testing.plugin_install import OFFLINE, install_into_venv, pip, source_copy

# On one worker: the module's two installs are made once per worker that runs any of its tests.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("check_plugin")]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "check-plugin"
TAG = "urn:li:tag:mlcopilot-missing-owner"
MODEL = model_urn("churn")
UNOWNED = dataset_urn("raw.unowned")
OWNED = dataset_urn("raw.owned")
FEATURE = feature_urn("churn", "tenure")
NOW = "2026-11-20T09:00:00Z"


@dataclass(frozen=True)
class Install:
    """An environment where the example plugin is installed, and how to run mlcopilot in it."""

    mode: str
    python: Path
    env: Mapping[str, str]
    """What the environment needs on top of the caller's (PYTHONPATH for --target)."""
    where: Path
    """Where pip put the package."""


def _install_into_venv(tmp: Path) -> Install:
    python, site = install_into_venv(EXAMPLE, tmp)
    return Install("pip install", python, {}, site)


def _install_into_target(tmp: Path) -> Install:
    target = tmp / "target"
    pip("install", *OFFLINE, "--target", str(target), str(source_copy(EXAMPLE, tmp)))
    return Install(
        "pip install --target", Path(sys.executable), {"PYTHONPATH": str(target)}, target
    )


@pytest.fixture(scope="module", params=["venv", "target"])
def install(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Install:
    tmp = tmp_path_factory.mktemp(f"plugin-{request.param}")
    if request.param == "venv":
        return _install_into_venv(tmp)
    return _install_into_target(tmp)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


class Mlcopilot:
    """``python -m mlcopilot`` in the plugin's environment, with its own MLCOPILOT_HOME."""

    def __init__(self, install: Install, home: Path) -> None:
        self.install = install
        self.home = home

    def __call__(self, *args: str, env: Mapping[str, str] | None = None) -> Run:
        environ = {
            k: v for k, v in os.environ.items() if not k.startswith(("MLCOPILOT_", "DATAHUB_"))
        }
        environ |= {"MLCOPILOT_HOME": str(self.home), "COLUMNS": "200", **self.install.env}
        environ |= dict(env or {})
        done = subprocess.run(
            [str(self.install.python), "-m", "mlcopilot", *args],
            capture_output=True,
            text=True,
            env=environ,
            timeout=180,
            check=False,
            cwd=self.home.parent,  # not the repository: nothing found by accident on sys.path
        )
        return Run(done.returncode, done.stdout, done.stderr)


def _owned(urn: str) -> MetadataChangeProposalWrapper:
    owner = OwnerClass(owner="urn:li:corpuser:zoe", type=OwnershipTypeClass.DATAOWNER)
    return MetadataChangeProposalWrapper(entityUrn=urn, aspect=OwnershipClass(owners=[owner]))


@pytest.fixture
def mlcopilot(install: Install, tmp_path: Path) -> Mlcopilot:
    """mlcopilot over a Lite catalog: a model fed by an unowned dataset and feature."""
    run = Mlcopilot(install, tmp_path / "home")
    metadata = write_metadata_file(
        tmp_path / "catalog.json",
        [
            *dataset("raw.unowned", fields=[("id", "long")]),
            *dataset("raw.owned", fields=[("id", "long")]),
            _owned(OWNED),
            *ml_feature("churn", "tenure", sources=["raw.owned"]),
            *ml_model("churn", features=[FEATURE], training_data=["raw.unowned", "raw.owned"]),
        ],
    )
    loaded = run("catalog", "load", str(metadata))
    assert loaded.code == 0, loaded.stderr
    return run


def _scan(run: Mlcopilot, *extra: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    done = run(*extra, "scan", "--now", NOW, "--format", "json", env=env)
    assert done.code == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _findings(report: Mapping[str, Any], check: str) -> dict[str, dict[str, Any]]:
    return {f["entity"]: f for m in report["models"] for f in m["findings"] if f["check"] == check}


def _aspect(home: Path, urn: str, name: str) -> Any:
    with sqlite3.connect(home / "catalog.db") as db:
        row = db.execute(
            "select metadata from metadata_aspect_v2 where urn=? and aspect_name=? and version=0",
            (urn, name),
        ).fetchone()
    return json.loads(row[0]) if row else None


def test_the_plugin_is_installed_where_pip_put_it_and_nowhere_else(install: Install) -> None:
    assert list(install.where.glob("mlcopilot_missing_owner-*.dist-info"))
    # The product's own environment does not see it: only the plugin's environment does.
    from importlib.metadata import entry_points

    assert "missing_owner" not in {ep.name for ep in entry_points(group="mlcopilot.checks")}


def test_checks_lists_the_plugin_with_its_docs(mlcopilot: Mlcopilot) -> None:
    done = mlcopilot("checks")
    assert done.code == 0, done.stderr
    assert "missing_owner" in done.stdout
    assert "has no owner in DataHub" in done.stdout  # its docstring's summary line
    assert "How to fix:" in done.stdout.split("missing_owner", 1)[1]


def test_a_whole_scan_finds_opens_writes_back_and_notifies(mlcopilot: Mlcopilot) -> None:
    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running():
        env = notify_env(github, slack, MLCOPILOT_GROUP_WAIT="0s")
        report = _scan(mlcopilot, env=env)

    # The finding: each unowned upstream of the default types, low; the owned one is fine.
    found = _findings(report, "missing_owner")
    assert set(found) == {UNOWNED, FEATURE}
    assert {f["severity"] for f in found.values()} == {"low"}
    assert "no ownership aspect" in found[UNOWNED]["message"]
    # The incident, and the write-back: its own tag, a native incident of its own type.
    assert set(report["incidents"]["opened"]) == {f["id"] for f in found.values()}
    tags = {t["tag"] for t in _aspect(mlcopilot.home, UNOWNED, "globalTags")["tags"]}
    assert TAG in tags
    assert _aspect(mlcopilot.home, OWNED, "globalTags") is None
    incident = _aspect(
        mlcopilot.home, f"urn:li:incident:mlcopilot-{found[UNOWNED]['id']}-1", "incidentInfo"
    )
    assert (incident["type"], incident["customType"]) == ("CUSTOM", "MISSING_OWNER")
    assert incident["priority"] == 3  # low
    document = _aspect(
        mlcopilot.home, f"urn:li:document:mlcopilot-{found[UNOWNED]['id']}-1", "documentInfo"
    )
    assert "Add an owner (a user or a group)" in document["contents"]["text"]
    # GitHub and Slack: the plugin's title, why and action, one group per entity.
    titles = sorted(issue["title"] for issue in github.issues.values())
    assert len(titles) == 2
    assert all(t.startswith("[mlcopilot] Missing owner at ") for t in titles)
    body = next(iter(github.issues.values()))["body"]
    assert "Nobody owns data these models depend on" in body
    assert "Add an owner (a user or a group)" in body
    roots = json.dumps(slack.roots())
    assert "Missing owner at" in roots
    assert "Add an owner (a user or a group)" in roots


def test_the_dry_run_previews_the_plugins_notifications(mlcopilot: Mlcopilot) -> None:
    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running():
        env = notify_env(github, slack, MLCOPILOT_GROUP_WAIT="0s")
        done = mlcopilot("scan", "--now", NOW, "--dry-run", env=env)
    assert done.code == 0, done.stderr
    assert re.search(r"Missing owner at\s+\S*raw\.unowned", done.stdout), done.stdout
    assert not github.issues  # a preview sends nothing
    assert _aspect(mlcopilot.home, UNOWNED, "globalTags") is None


def test_the_plugins_section_configures_it(mlcopilot: Mlcopilot, tmp_path: Path) -> None:
    config = tmp_path / "mlcopilot.toml"
    config.write_text('[checks.missing_owner]\nentity_types = ["dataset"]\n', encoding="utf-8")
    report = _scan(mlcopilot, "--config", str(config))
    assert set(_findings(report, "missing_owner")) == {UNOWNED}

    config.write_text("[checks.missing_owner]\nenabled = false\n", encoding="utf-8")
    assert _findings(_scan(mlcopilot, "--config", str(config)), "missing_owner") == {}


def test_a_bad_key_in_the_plugins_section_is_an_error_naming_it(
    mlcopilot: Mlcopilot, tmp_path: Path
) -> None:
    config = tmp_path / "mlcopilot.toml"
    config.write_text('[checks.missing_owner]\nentity_type = ["dataset"]\n', encoding="utf-8")
    done = mlcopilot("--config", str(config), "scan", "--now", NOW)
    assert done.code == 2, done.stderr
    assert "missing_owner" in done.stderr
    assert "entity_type" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Any]:
    from tests.catalog.datahub_backend import start_standin

    server = start_standin(ml_model("churn"), tmp_path / "standin")
    yield server
    server.__exit__(None, None, None)


def test_datahub_setup_creates_the_plugins_tag(mlcopilot: Mlcopilot, standin: Any) -> None:
    from mlcopilot.catalog.datahub.catalog import DataHubCatalog

    done = mlcopilot("datahub", "setup", "--catalog", f"datahub:{standin.url}")
    assert done.code == 0, done.stdout + done.stderr
    assert "created 12, already there 0" in done.stdout  # 7 + 1 tags, 4 properties
    assert f"+ {TAG}" in done.stdout
    with DataHubCatalog(standin.url, timeout=5.0) as catalog:
        assert catalog.nodes([TAG])[TAG].exists
    again = mlcopilot("datahub", "setup", "--catalog", f"datahub:{standin.url}", "--dry-run")
    assert again.code == 0, again.stderr
    assert "would create 0, already there 12" in again.stdout


# --- the README's "Writing a check" is the example package's truth


def _toml_blocks(markdown: str) -> list[dict[str, Any]]:
    return [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", markdown, flags=re.S)]


def _example_module() -> Any:
    path = EXAMPLE / "src" / "mlcopilot_missing_owner" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_example_missing_owner", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs: pydantic resolves the config's annotations through it.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


@pytest.mark.parametrize(
    ("readme", "section"),
    [(ROOT / "README.md", "\n## Writing a check\n"), (EXAMPLE / "README.md", "\n## Install\n")],
    ids=["README", "example-README"],
)
def test_the_readmes_snippets_are_the_example_package(readme: Path, section: str) -> None:
    text = readme.read_text(encoding="utf-8").split(section, 1)[1].split("\n## ", 1)[0]
    if section == "\n## Install\n":  # the example's README configures it in the next section
        text += readme.read_text(encoding="utf-8").split("\n## Configure\n", 1)[1]
    blocks = _toml_blocks(text)
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text(encoding="utf-8"))
    entry_points = project["project"]["entry-points"]
    assert {"project": {"entry-points": entry_points}} in blocks
    module = _example_module()
    (target,) = entry_points["mlcopilot.checks"].values()
    cls = getattr(module, target.partition(":")[2])
    assert cls.name == cls.info.name == next(iter(entry_points["mlcopilot.checks"]))
    (config,) = [b["checks"][cls.name] for b in blocks if "checks" in b]
    config.pop("enabled", None)
    cls.config_model.model_validate(config)
    # Every field the main README names on CheckInfo is one.
    if readme.name == "README.md" and readme.parent == ROOT:
        named = set(re.findall(r"`(\w+)`", text.split("`info`", 1)[1].split("- `config_model`")[0]))
        fields = {f.name for f in dataclasses.fields(CheckInfo)}
        assert {"title", "tag", "tag_description", "why", "action", "folds_in", "docs"} <= named
        assert named & fields == {n for n in named if n in fields}
        assert fields <= named | {"name"}
