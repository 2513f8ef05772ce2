"""One configuration: file < environment < flag, sources shown, bad keys and secrets refused.

The loader is tested in-process; exit codes, ``config show``/``init`` and a scan changed by a
check's section are tested through the ``mlcopilot`` command line (``run_cli``).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.errors import ConfigError
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.settings import load_settings
from testing.installed_cli import Ran, run_cli
from tests.conftest import REPO

TOKEN = "ghp_" + "Q" * 36
WEBHOOK = "https://hooks.slack.com/services/T000/B000/" + "s" * 24
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,fraud_v2,PROD)"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.payments,PROD)"
NOW = "2026-11-20T09:00:00Z"
TWO_DAYS_EARLIER_MS = 1_795_165_200_000 - 2 * 86_400_000  # NOW minus 48 hours


@pytest.fixture(autouse=True)
def no_config_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLCOPILOT_CONFIG", raising=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- precedence and sources ----------------------------------------------------------------


def test_file_then_environment_then_flag(tmp_path: Path) -> None:
    config = write(
        tmp_path / "c.toml",
        '# comment\nstate_url = "sqlite:///file.db"\n\n[notify]\ngroup_wait = "1m"\n'
        'group_interval = "10m"\n',
    )
    env = {"MLCOPILOT_GROUP_WAIT": "2m"}
    from_file = load_settings(config, environ={})
    assert from_file.state_url == "sqlite:///file.db"
    assert from_file.source_of("state_url") == f"{config}:2"
    assert from_file.notify.group_wait.total_seconds() == 60

    both = load_settings(config, environ={**env, "MLCOPILOT_STATE_URL": "sqlite:///env.db"})
    assert both.notify.group_wait.total_seconds() == 120  # env over file
    assert both.source_of("notify.group_wait") == "MLCOPILOT_GROUP_WAIT"
    assert both.notify.group_interval.total_seconds() == 600  # the file still counts
    assert both.source_of("notify.group_interval") == f"{config}:6"
    assert both.state_url == "sqlite:///env.db"

    flagged = load_settings(
        config, environ={"MLCOPILOT_STATE_URL": "sqlite:///env.db"}, state_url="sqlite:///flag.db"
    )
    assert flagged.state_url == "sqlite:///flag.db"  # flag over env over file
    assert flagged.source_of("state_url") == "--state-url"
    assert flagged.source_of("github.repo") == "default"


def test_config_variable_and_home_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / "config.toml", '[github]\nlabel = "from-home"\n')
    named = write(tmp_path / "named.toml", '[github]\nlabel = "from-variable"\n')
    assert load_settings(environ={"MLCOPILOT_HOME": str(home)}).github.label == "from-home"
    chosen = load_settings(environ={"MLCOPILOT_HOME": str(home), "MLCOPILOT_CONFIG": str(named)})
    assert chosen.github.label == "from-variable"
    assert chosen.file == named
    flag = write(tmp_path / "flag.toml", '[github]\nlabel = "from-flag"\n')
    over = load_settings(
        flag, environ={"MLCOPILOT_HOME": str(home), "MLCOPILOT_CONFIG": str(named)}
    )
    assert over.github.label == "from-flag"
    assert load_settings(environ={"MLCOPILOT_HOME": str(tmp_path / "empty")}).file is None
    with pytest.raises(ConfigError, match=r"MLCOPILOT_CONFIG .*missing\.toml: no such"):
        load_settings(environ={"MLCOPILOT_CONFIG": str(tmp_path / "missing.toml")})


def test_notification_settings_come_from_the_file_and_the_environment(tmp_path: Path) -> None:
    config = write(
        tmp_path / "c.toml",
        '[github]\nrepo = "acme/models"\nlabel = "ml-risk"\n[notify]\nrepeat_interval = "off"\n',
    )
    settings = NotifySettings.from_settings(load_settings(config, environ={"GITHUB_TOKEN": TOKEN}))
    assert settings.github is not None
    assert (settings.github.repo, settings.github.label) == ("acme/models", "ml-risk")
    assert settings.github.token.get_secret_value() == TOKEN
    assert settings.policy.repeat_interval is None
    with pytest.raises(
        ConfigError, match=re.escape(f"{config}:2: github.repo is set but no token")
    ):
        NotifySettings.from_settings(load_settings(config, environ={}))


def test_defaults_are_the_policy_defaults() -> None:
    from mlcopilot.model import NotifyPolicy

    assert NotifySettings.from_settings(load_settings(environ={})).policy == NotifyPolicy()


# --- refusals ------------------------------------------------------------------------------


def test_an_unknown_key_names_the_file_line_and_key(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[github]\nrepo = "a/b"\n\n[slack]\nchanel = "#ml"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})
    assert str(caught.value) == f"{config}:5: slack.chanel: unknown key"
    top = write(tmp_path / "top.toml", 'catalog = "lite:x.db"\nhomedir = "/tmp"\n')
    with pytest.raises(ConfigError, match=re.escape(f"{top}:2: homedir: unknown key")):
        load_settings(top, environ={})


def test_a_bad_value_says_where_it_came_from(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", '[notify]\ngroup_wait = "soon"\n')
    with pytest.raises(ConfigError, match=re.escape(f"{config}:2: notify.group_wait: not a dur")):
        load_settings(config, environ={})
    with pytest.raises(ConfigError, match=r"^MLCOPILOT_GROUP_WAIT: not a duration"):
        load_settings(environ={"MLCOPILOT_GROUP_WAIT": "soon"})
    broken = write(tmp_path / "broken.toml", "[github\nrepo = 1\n")
    with pytest.raises(ConfigError, match=re.escape(f"{broken}: not valid TOML")):
        load_settings(broken, environ={})


@pytest.mark.parametrize(
    ("text", "key", "secret"),
    [
        (f'[github]\nrepo = "a/b"\ntoken = "{TOKEN}"\n', "github.token", TOKEN),
        (f'[slack]\nwebhook_url = "{WEBHOOK}"\n', "slack.webhook_url", WEBHOOK),
        ('state_url = "postgresql://scanner:hunter2secret@db/ml"\n', "state_url", "hunter2secret"),
        (f'[checks.stale_source]\nnote = "{TOKEN}"\n', "checks.stale_source.note", TOKEN),
        (
            f'[datahub]\nui_url = "https://datahub.example"\ntoken = "{TOKEN}"\n',
            "datahub.token",
            TOKEN,
        ),
    ],
)
def test_a_secret_in_the_file_is_refused_without_echoing_it(
    tmp_path: Path, text: str, key: str, secret: str
) -> None:
    config = write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config, environ={})
    message = str(caught.value)
    line = text[: text.index(secret)].count("\n") + 1
    assert message.startswith(f"{config}:{line}: {key} ")
    assert "secret" in message
    assert secret not in message


def test_secrets_from_a_file_variable(tmp_path: Path) -> None:
    secret_file = write(tmp_path / "token", TOKEN + "\n")
    settings = load_settings(environ={"GITHUB_TOKEN_FILE": str(secret_file)})
    assert settings.github.token is not None
    assert settings.github.token.get_secret_value() == TOKEN
    assert settings.source_of("github.token") == "GITHUB_TOKEN_FILE"
    with pytest.raises(ConfigError, match="both GITHUB_TOKEN and GITHUB_TOKEN_FILE are set"):
        load_settings(environ={"GITHUB_TOKEN_FILE": str(secret_file), "GITHUB_TOKEN": TOKEN})


# --- the command ---------------------------------------------------------------------------


Run = Ran
Cli = Callable[..., Run]


@pytest.fixture
def mlcopilot(tmp_path: Path) -> Cli:
    """Run ``mlcopilot ARGS`` with MLCOPILOT_HOME in tmp_path (plus ``env``)."""

    def run(*args: str, env: dict[str, str] | None = None) -> Run:
        # The guard rails (tests/conftest.py) have taken MLCOPILOT_CONFIG out of the environment.
        return run_cli(tmp_path / "home", *args, env=env, columns=200)

    return run


def shown(run: Run) -> dict[str, dict[str, Any]]:
    assert run.code == 0, run.stderr
    result: dict[str, dict[str, Any]] = json.loads(run.stdout)
    return result


def test_config_show_gives_every_key_its_value_and_source(tmp_path: Path, mlcopilot: Cli) -> None:
    config = write(
        tmp_path / "c.toml",
        '[github]\nrepo = "acme/models"\n\n[notify]\ngroup_wait = "1m"\n\n'
        "[checks.stale_source]\ndefault_sla_hours = 12\n",
    )
    env = {"GITHUB_TOKEN": TOKEN, "MLCOPILOT_GROUP_INTERVAL": "7m"}
    keys = shown(
        mlcopilot(
            "--config",
            str(config),
            "config",
            "show",
            "--format",
            "json",
            "--state-url",
            "sqlite:///flag.db",
            env=env,
        )
    )
    assert keys["github.repo"] == {"value": "acme/models", "source": f"{config}:2"}
    assert keys["github.token"] == {"value": "[REDACTED]", "source": "GITHUB_TOKEN"}
    assert keys["notify.group_wait"] == {"value": "1m", "source": f"{config}:5"}
    assert keys["notify.group_interval"] == {"value": "7m", "source": "MLCOPILOT_GROUP_INTERVAL"}
    assert keys["state_url"] == {"value": "sqlite:///flag.db", "source": "--state-url"}
    assert keys["checks.stale_source.default_sla_hours"] == {"value": 12, "source": f"{config}:8"}
    assert keys["github.api_url"] == {"value": "https://api.github.com", "source": "default"}
    assert keys["home"]["source"] == "MLCOPILOT_HOME"
    # Every key of every section is there, not only those set.
    for key in ("datahub.gms_url", "slack.channel", "notify.repeat_interval", "catalog"):
        assert key in keys
    text = mlcopilot("--config", str(config), "config", "show", env=env)
    assert text.code == 0
    assert 'github.repo = "acme/models"' in text.stdout
    assert f"# {config}:2" in text.stdout
    assert TOKEN not in text.stdout + text.stderr


def test_config_show_redacts_a_password_given_in_the_environment(mlcopilot: Cli) -> None:
    url = "postgresql+psycopg://scanner:hunter2secret@db.example/ml"
    keys = shown(mlcopilot("config", "show", "--format", "json", env={"MLCOPILOT_STATE_URL": url}))
    assert "hunter2secret" not in json.dumps(keys)
    assert keys["state_url"]["source"] == "MLCOPILOT_STATE_URL"


def test_bad_configuration_exits_2_with_one_line(tmp_path: Path, mlcopilot: Cli) -> None:
    bad = write(tmp_path / "bad.toml", '[github]\nrepo = "a/b"\nrepository = "a/b"\n')
    run = mlcopilot("--config", str(bad), "scan")
    assert run.code == 2
    assert f"{bad}:3: github.repository: unknown key" in run.stderr.replace("\n", "")
    secret = write(tmp_path / "secret.toml", f'[github]\ntoken = "{TOKEN}"\n')
    run = mlcopilot("--config", str(secret), "config", "show")
    assert run.code == 2
    assert "github.token is a secret" in run.stderr
    assert TOKEN not in run.stderr + run.stdout
    missing = mlcopilot("--config", str(tmp_path / "nowhere.toml"), "incidents", "list")
    assert missing.code == 2
    assert "no such configuration file" in missing.stderr
    check = write(tmp_path / "check.toml", "[checks.stale_source]\ndefault_sla_hour = 12\n")
    run = mlcopilot("--config", str(check), "scan")
    assert run.code == 2
    assert "default_sla_hour" in run.stderr
    assert str(check) in run.stderr.replace("\n", "")


def test_config_init_writes_a_file_that_loads_back_to_the_defaults(
    tmp_path: Path, mlcopilot: Cli
) -> None:
    printed = mlcopilot("config", "init")
    assert printed.code == 0
    tomllib.loads(printed.stdout)  # stdout is the file itself
    path = tmp_path / "etc" / "mlcopilot.toml"
    assert mlcopilot("config", "init", str(path)).code == 0
    assert path.read_text(encoding="utf-8") == printed.stdout
    again = mlcopilot("config", "init", str(path))
    assert again.code == 2
    assert "already exists" in again.stderr
    with_file = shown(mlcopilot("--config", str(path), "config", "show", "--format", "json"))
    defaults = shown(mlcopilot("config", "show", "--format", "json"))
    assert {k: v["value"] for k, v in with_file.items()} == {
        k: v["value"] for k, v in defaults.items()
    }
    # Every settable key is in the starting file, each documented next to its variable.
    for key in ("group_wait", "allowed_hosts", "gms_url", "[checks.stale_source]"):
        assert key in printed.stdout
    assert "GITHUB_TOKEN_FILE" in printed.stdout


def _metadata(path: Path) -> Path:
    """A model trained on one dataset last written 48 hours before NOW, with no SLA."""

    def mcp(urn: str, aspect: str, value: dict[str, Any]) -> dict[str, Any]:
        entity = urn.split(":")[2]
        return {
            "entityType": entity,
            "entityUrn": urn,
            "changeType": "UPSERT",
            "aspectName": aspect,
            "aspect": {"json": value},
        }

    records = [
        mcp(DATASET, "datasetProperties", {"name": "raw.payments", "customProperties": {}}),
        mcp(
            DATASET,
            "operation",
            {
                "timestampMillis": TWO_DAYS_EARLIER_MS,
                "operationType": "INSERT",
                "lastUpdatedTimestamp": TWO_DAYS_EARLIER_MS,
            },
        ),
        mcp(MODEL, "mlModelProperties", {"name": "fraud_v2", "customProperties": {}}),
        mcp(MODEL, "mlModelTrainingData", {"trainingData": [{"dataset": DATASET}]}),
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _checks_found(run: Run) -> list[str]:
    assert run.code in (0, 1), run.stderr
    report = json.loads(run.stdout)
    return sorted(f["check"] for m in report["models"] for f in m["findings"])


def test_a_bad_value_is_named_by_the_source_that_set_it(tmp_path: Path, mlcopilot: Cli) -> None:
    """A value from the file is the file's line, not a flag the user never typed."""
    config = write(tmp_path / "c.toml", 'state_url = "sqlite://"\ncatalog = "foo:bar"\n')
    run = mlcopilot("--config", str(config), "scan")
    assert run.code == 2
    assert run.stderr.startswith(f"error: {config}:2: catalog: 'foo:bar': expected lite:PATH")
    assert "--catalog" not in run.stderr
    run = mlcopilot("scan", env={"MLCOPILOT_CATALOG": "foo:bar"})
    assert run.stderr.startswith("error: MLCOPILOT_CATALOG: 'foo:bar': expected lite:PATH")
    run = mlcopilot("scan", "--catalog", "foo:bar")
    assert run.stderr.startswith("error: --catalog 'foo:bar': expected lite:PATH")


def test_the_catalog_kinds_the_settings_take_are_the_backends() -> None:
    from mlcopilot.catalog import BACKENDS
    from mlcopilot.settings import CATALOG_KINDS

    assert set(CATALOG_KINDS) == set(BACKENDS)


def test_config_naming_a_directory_says_so(tmp_path: Path, mlcopilot: Cli) -> None:
    run = mlcopilot("--config", str(tmp_path), "scan")
    assert run.code == 2
    [line] = run.stderr.splitlines()
    assert line == (
        f"error: --config {tmp_path}: is a directory, not a configuration file; name the TOML "
        "file (e.g. mlcopilot.toml)"
    )
    run = mlcopilot("incidents", "list", env={"MLCOPILOT_CONFIG": str(tmp_path)})
    assert f"MLCOPILOT_CONFIG {tmp_path}: is a directory" in run.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '[notify]\ngroup_wait = "1m"\n\n[checks.stale_source]\ndefault_sla_hours = 24\n'
            "bogus = 1\n",
            ":6: checks.stale_source.bogus: unknown key",
        ),
        ("[checks]\nstale_source.bogus = 1\n", ":2: checks.stale_source.bogus: unknown key"),
        (
            '[checks.stale_source]\ndefault_sla_hours = "lots"\n',
            ":2: checks.stale_source.default_sla_hours: Input should be a valid number",
        ),
        ("\n[checks.nosuch]\nx = 1\n", ":2: unknown check 'nosuch' configured"),
    ],
)
def test_a_check_sections_problem_is_named_with_its_file_and_line(
    tmp_path: Path, mlcopilot: Cli, text: str, said: str
) -> None:
    config = write(tmp_path / "c.toml", text)
    commands = [("scan",)] if "unknown check" in said else [("scan",), ("config", "show")]
    for command in commands:
        run = mlcopilot("--config", str(config), *command)
        assert run.code == 2, command
        [line] = run.stderr.splitlines()
        assert line.startswith(f"error: {config}{said}"), (command, line)


def test_a_checks_section_changes_the_scan(tmp_path: Path, mlcopilot: Cli) -> None:
    assert mlcopilot("catalog", "load", str(_metadata(tmp_path / "meta.json"))).code == 0
    scan = ("scan", "--now", NOW, "--dry-run", "--format", "json")
    assert "stale_source" not in _checks_found(mlcopilot(*scan))  # no SLA declared: unchecked
    sla = write(tmp_path / "sla.toml", "[checks.stale_source]\ndefault_sla_hours = 12\n")
    assert _checks_found(mlcopilot("--config", str(sla), *scan)) == ["stale_source"]
    off = write(
        tmp_path / "off.toml",
        "[checks.stale_source]\ndefault_sla_hours = 12\nenabled = false\n",
    )
    assert "stale_source" not in _checks_found(mlcopilot("--config", str(off), *scan))


# --- the README ----------------------------------------------------------------------------


def test_the_readme_example_configuration_loads(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, flags=re.DOTALL)
    assert blocks, "the Configuration section shows an example file"
    config = write(tmp_path / "readme.toml", blocks[0])
    settings = load_settings(config, environ={"GITHUB_TOKEN": TOKEN})
    assert settings.file == config
    assert settings.checks, "the example configures a check"
    NotifySettings.from_settings(settings)  # and the notification part is consistent
    from mlcopilot.scan.wiring import configured_checks

    assert configured_checks(settings)  # each check accepts its section
    # The table documents every key the settings have.
    for key, _, _ in load_settings(environ={}).effective():
        assert f"`{key}`" in section, key
