from __future__ import annotations

import importlib
import inspect
import logging
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.checks import (
    BUILTIN_CHECKS,
    builtin_infos,
    check_config_models,
    describe_checks,
    load_checks,
)
from mlcopilot.checks.deprecated_source import DeprecatedSource
from mlcopilot.checks.pii_exposure import PiiExposure
from mlcopilot.checks.schema_drift import SchemaDrift
from mlcopilot.checks.stale_source import StaleSource
from mlcopilot.config import PluginConfig
from mlcopilot.errors import ConfigError
from mlcopilot.protocols import Check

# mypy checks each built-in against the Check protocol through these assignments.
_drift: type[Check] = SchemaDrift
_pii: type[Check] = PiiExposure
_stale: type[Check] = StaleSource
_deprecated: type[Check] = DeprecatedSource

BUILTIN_NAMES = sorted(BUILTIN_CHECKS)


def builtin_class(name: str) -> type[Check]:
    module, _, cls = BUILTIN_CHECKS[name].partition(":")
    found: type[Check] = getattr(importlib.import_module(module), cls)
    return found


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_name_is_its_module_name(name: str) -> None:
    module = BUILTIN_CHECKS[name].partition(":")[0]
    assert module == f"mlcopilot.checks.{name}"
    assert builtin_class(name).name == name


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_is_documented_for_users(name: str) -> None:
    doc = dict(describe_checks())[name]
    summary, _, body = doc.partition("\n\n")
    assert summary
    assert "\n" not in summary
    for section in ("What it flags:", "Why it matters:", "How to fix:"):
        assert section in body


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_config_has_defaults_and_forbids_unknown_keys(name: str) -> None:
    config_model = builtin_class(name).config_model
    assert issubclass(config_model, PluginConfig)
    assert config_model.model_config.get("extra") == "forbid"
    config_model()  # every setting has a default


def test_loads_every_builtin_by_default() -> None:
    checks = load_checks()

    assert [c.name for c in checks] == BUILTIN_NAMES


def test_loads_only_the_enabled_checks_with_their_config() -> None:
    (check,) = load_checks({"stale_source": {"default_sla_hours": 12}}, enabled=["stale_source"])

    assert isinstance(check, StaleSource)
    assert check.config.default_sla_hours == 12


@pytest.mark.parametrize(
    ("config", "enabled", "facts"),
    [
        pytest.param(
            {"pii_exposure": {"tag": ["PII"]}},
            None,
            ["'pii_exposure'", "unknown key 'tag'"],
            id="misspelt-key",
        ),
        pytest.param(
            {"stale_source": {"default_sla_hours": "daily"}},
            None,
            ["'stale_source'", "default_sla_hours", "'daily'"],
            id="invalid-value",
        ),
        pytest.param(
            {"schema_drift": {"rename_confidence": 2}},
            ["stale_source"],
            ["'schema_drift'", "rename_confidence"],
            id="section-of-a-disabled-check-is-still-validated",
        ),
        pytest.param(
            {"schema_drfit": {}},
            None,
            ["unknown check 'schema_drfit'", "schema_drift"],
            id="section-for-unknown-check",
        ),
        pytest.param(
            None,
            ["stale_data"],
            ["unknown check 'stale_data'", "stale_source"],
            id="unknown-enabled-check",
        ),
        pytest.param(
            {"stale_source": ["default_sla_hours"]},
            None,
            ["'stale_source'", "mapping"],
            id="section-not-a-mapping",
        ),
    ],
)
def test_unusable_config_is_a_config_error(
    config: dict[str, Any] | None, enabled: list[str] | None, facts: list[str]
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_checks(config, enabled=enabled)

    for fact in facts:
        assert fact in str(raised.value)


# --- Third-party checks, registered through a real distribution's entry points.

PLUGIN_MODULE = '''
from typing import ClassVar

from mlcopilot.config import PluginConfig
from mlcopilot.model import CheckInfo, CheckOutcome


def info(name):
    return CheckInfo(
        name=name,
        title="Null rate",
        tag="urn:li:tag:acme-null-rate",
        tag_description="Too many nulls upstream of a model.",
        incident_type="FIELD",
        why="Nulls become defaults in features.",
        action="Fix the pipeline.",
    )


class NullRateConfig(PluginConfig):
    max_null_rate: float = 0.1


class NullRate:
    """Columns with too many nulls.

    What it flags: nothing yet; it is a test double.
    """

    name: ClassVar[str] = "null_rate"
    info: ClassVar[CheckInfo] = info("null_rate")
    config_model: ClassVar[type[PluginConfig]] = NullRateConfig

    def __init__(self, config):
        self.config = config

    def run(self, node, ctx):
        return CheckOutcome()


class Misnamed(NullRate):
    name: ClassVar[str] = "something_else"


class Exploding(NullRate):
    name: ClassVar[str] = "exploding"
    info: ClassVar[CheckInfo] = info("exploding")

    def __init__(self, config):
        raise RuntimeError("needs a licence key")


class Uninformed(NullRate):
    name: ClassVar[str] = "uninformed"
    info = {"title": "a dict is not a CheckInfo"}


class Mislabelled(NullRate):
    name: ClassVar[str] = "mislabelled"


not_a_class = 42
'''

BAD_INFO_MODULE = """
from mlcopilot.model import CheckInfo

INFO = CheckInfo(
    name="bad_tag",
    title="Bad tag",
    tag="mlcopilot-bad-tag",
    tag_description="",
    incident_type="FIELD",
    why="",
    action="",
)
"""


InstallPlugin = Callable[[str, dict[str, str]], None]
"""``install(entry_points, modules)``: entry_points.txt text, and module name -> source."""


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InstallPlugin]:
    """Install a fake distribution ``acme-checks`` with the given entry points and modules."""
    site = tmp_path / "site"
    site.mkdir()
    added: list[str] = []

    def install(entry_points: str, modules: dict[str, str]) -> None:
        dist_info = site / "acme_checks-1.0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: acme-checks\nVersion: 1.0\n"
        )
        (dist_info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
        for name, source in modules.items():
            (site / f"{name}.py").write_text(source)
            added.append(name)
        monkeypatch.syspath_prepend(str(site))

    yield install
    for name in added:
        sys.modules.pop(name, None)


def test_entry_point_check_is_loaded_and_configured(install_plugin: InstallPlugin) -> None:
    install_plugin(
        """
        [mlcopilot.checks]
        null_rate = acme_null_rate:NullRate
        """,
        {"acme_null_rate": PLUGIN_MODULE},
    )

    checks = load_checks({"null_rate": {"max_null_rate": 0.5}})

    assert [c.name for c in checks] == sorted([*BUILTIN_NAMES, "null_rate"])
    (plugin,) = [c for c in checks if c.name == "null_rate"]
    assert plugin.config.max_null_rate == 0.5  # type: ignore[attr-defined]
    assert dict(describe_checks())["null_rate"].startswith("Columns with too many nulls.")


def test_entry_point_check_config_typo_is_a_config_error(install_plugin: InstallPlugin) -> None:
    install_plugin(
        "[mlcopilot.checks]\nnull_rate = acme_null_rate2:NullRate\n",
        {"acme_null_rate2": PLUGIN_MODULE},
    )

    with pytest.raises(ConfigError, match="'null_rate': unknown key 'max_nulls'"):
        load_checks({"null_rate": {"max_nulls": 1}})


@pytest.mark.parametrize(
    ("entry_point", "reason"),
    [
        pytest.param("broken = acme_missing_module:Check", "cannot be imported", id="import-error"),
        pytest.param("broken = acme_plugins:NoSuchClass", "cannot be imported", id="no-such-class"),
        pytest.param("broken = acme_plugins:not_a_class", "not a class", id="not-a-class"),
        pytest.param(
            "broken = acme_plugins:Misnamed", "declares name 'something_else'", id="misnamed"
        ),
        pytest.param(
            "schema_drift = acme_plugins:NullRate", "built-in check", id="shadows-builtin"
        ),
        pytest.param(
            "exploding = acme_plugins:Exploding", "constructor failed", id="crashing-init"
        ),
        pytest.param(
            "uninformed = acme_plugins:Uninformed", "info is not an mlcopilot", id="no-info"
        ),
        pytest.param(
            "mislabelled = acme_plugins:Mislabelled",
            "its info names the check 'null_rate'",
            id="info-of-another-check",
        ),
        pytest.param(
            "bad_tag = acme_bad_info:Anything",
            "tag 'mlcopilot-bad-tag' is not a tag urn",
            id="malformed-info",
        ),
    ],
)
def test_broken_entry_point_is_skipped_with_a_warning(
    install_plugin: InstallPlugin, caplog: pytest.LogCaptureFixture, entry_point: str, reason: str
) -> None:
    install_plugin(
        f"""
        [mlcopilot.checks]
        {entry_point}
        null_rate = acme_plugins:NullRate
        """,
        {"acme_plugins": PLUGIN_MODULE, "acme_bad_info": BAD_INFO_MODULE},
    )

    with caplog.at_level(logging.WARNING, logger="mlcopilot.checks"):
        checks = load_checks()

    assert [c.name for c in checks] == sorted([*BUILTIN_NAMES, "null_rate"])
    assert isinstance(next(c for c in checks if c.name == "schema_drift"), SchemaDrift)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "skipped" in warning.getMessage()
    assert reason in warning.getMessage()


# --- What every section accepts, and what the registry tells the settings about.


def test_enabled_false_leaves_a_check_out_and_its_other_keys_are_still_validated() -> None:
    checks = load_checks({"stale_source": {"enabled": False}, "pii_exposure": {"enabled": True}})
    assert [c.name for c in checks] == [n for n in BUILTIN_NAMES if n != "stale_source"]
    with pytest.raises(ConfigError, match="'stale_source': unknown key 'default_sla'"):
        load_checks({"stale_source": {"enabled": False, "default_sla": 1}})


def test_enabled_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError, match="'schema_drift': enabled: must be true or false"):
        load_checks({"schema_drift": {"enabled": "no"}})


def test_check_config_models_names_each_checks_own_model(install_plugin: InstallPlugin) -> None:
    install_plugin(
        "[mlcopilot.checks]\nnull_rate = acme_null_rate3:NullRate\n",
        {"acme_null_rate3": PLUGIN_MODULE},
    )
    models = check_config_models()
    assert sorted(models) == sorted([*BUILTIN_NAMES, "null_rate"])
    for name in BUILTIN_NAMES:
        assert models[name] is builtin_class(name).config_model
    assert models["null_rate"]().model_dump() == {"max_null_rate": 0.1}


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_info_describes_the_check(name: str) -> None:
    cls = builtin_class(name)
    info = builtin_infos()[name]
    assert info.name == name
    assert info.docs == inspect.getdoc(cls)
    assert info.tag == f"urn:li:tag:mlcopilot-{name.replace('_', '-')}"
    assert all((info.title, info.why, info.action, info.tag_description))


def test_deprecation_folds_in_drift_and_staleness() -> None:
    assert builtin_infos()["deprecated_source"].folds_in == {"schema_drift", "stale_source"}
    # An incident a failing assertion raised is the assertion's news, not news of its own.
    assert builtin_infos()["failing_assertion"].folds_in == {"upstream_incident"}
    folding = {"deprecated_source", "failing_assertion"}
    assert not any(builtin_infos()[n].folds_in for n in BUILTIN_NAMES if n not in folding)
