"""``mlcopilot watch --lease`` and ``--connect-timeout``: carried into the pipeline, or refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testing.installed_cli import run_cli

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")


def test_the_lease_is_written_into_the_printed_pipeline(tmp_path: Path) -> None:
    ran = run_cli(tmp_path, "watch", "--print-config", "--lease", "90s")
    assert ran.code == 0, ran.stderr
    action = yaml.safe_load(ran.stdout)["action"]
    assert action["type"] == "mlcopilot"
    assert action["config"]["lease"] == "90s"


def test_without_the_flag_no_lease_is_written(tmp_path: Path) -> None:
    ran = run_cli(tmp_path, "watch", "--print-config")
    assert ran.code == 0, ran.stderr
    assert "lease" not in yaml.safe_load(ran.stdout)["action"]["config"]


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--lease", "0s", "--lease 0s: must be more than 0"),
        ("--lease", "soon", "--lease: 'soon' is not a duration"),
        ("--connect-timeout", "0", "--connect-timeout 0: must be more than 0"),
        ("--connect-timeout", "later", "--connect-timeout: 'later' is not a duration"),
    ],
)
def test_a_bad_duration_is_one_error_line_and_exit_2(
    tmp_path: Path, flag: str, value: str, says: str
) -> None:
    ran = run_cli(tmp_path, "watch", flag, value)
    assert ran.code == 2, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, ran.stderr
    assert says in errors[0], errors
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "no server is configured: set DATAHUB_GMS_URL"),
        ({"DATAHUB_GMS_URL": "https://acme.acryl.io/gms"}, "needs a token"),
        (
            {
                "DATAHUB_GMS_URL": "https://acme.acryl.io/gms?token=CANARYQ",
                "DATAHUB_GMS_TOKEN": "t",
            },
            "takes no query string",
        ),
    ],
)
def test_datahub_cloud_without_its_server_is_one_error_line(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    """Not a traceback from DataHub Actions given the literal ``${DATAHUB_GMS_URL}``."""
    unset = {"DATAHUB_GMS_URL": "", "DATAHUB_GMS_TOKEN": ""}
    ran = run_cli(
        tmp_path, "watch", env={**unset, "MLCOPILOT_WATCH_SOURCE": "datahub-cloud", **env}
    )
    assert ran.code == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    [line] = ran.stderr.splitlines()
    assert line.startswith("error: "), line
    assert says in line
    assert "CANARYQ" not in line
