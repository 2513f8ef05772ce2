"""No secret in a warning, and every error one ``error:`` line: a GMS URL with a query string
is refused before anything connects, and HTTP libraries' retry warnings stay off stderr
unless ``--verbose`` asks for them (and are redacted when they show).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlcopilot.cli._app import set_up_logging
from testing.installed_cli import run_cli

CANARY = "CANARYQ"
RETRY = (
    "Retrying (_WeightedRetry(total=1, connect=None, read=None, redirect=None, status=None)) "
    "after connection broken by 'NewConnectionError(...)': /api/graphql?token=" + CANARY
)


@pytest.mark.parametrize("command", [("scan",), ("impact", "raw.customers", "--drop", "email")])
def test_a_gms_url_with_a_query_string_is_one_error_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    spec = f"datahub:http://admin:PW@127.0.0.1:1/?token={CANARY}"
    ran = run_cli(tmp_path / "home", *command, "--catalog", spec)

    assert ran.code == 2, ran.stderr
    [line] = ran.stderr.splitlines()
    assert line.startswith("error: datahub:http://127.0.0.1:1/: the DataHub GMS URL takes no")
    assert CANARY not in ran.stderr + ran.stdout
    assert "PW" not in ran.stderr


@pytest.fixture
def own_logging() -> Iterator[None]:
    """The root logger as it was before the test set the command's logging up."""
    root = logging.getLogger()
    saved = (root.level, root.handlers[:])
    yield
    for handler in root.handlers:
        if handler not in saved[1]:
            handler.close()
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]


@pytest.mark.usefixtures("own_logging")
def test_library_retry_warnings_stay_off_stderr_without_verbose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    set_up_logging(level=logging.WARNING, log_file=None)  # the default: no -v
    logging.getLogger("urllib3.connectionpool").warning(RETRY)
    logging.getLogger("requests.adapters").warning("retrying")
    logging.getLogger("mlcopilot.scan").warning("our own warning")

    assert capsys.readouterr().err == "warning: our own warning\n"


@pytest.mark.usefixtures("own_logging")
def test_with_verbose_they_show_redacted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    set_up_logging(level=logging.INFO, log_file=log)
    logging.getLogger("urllib3.connectionpool").warning(RETRY)

    shown = capsys.readouterr().err
    assert shown.startswith("warning: Retrying")
    assert CANARY not in shown
    assert "Retrying" in log.read_text(encoding="utf-8")
    assert CANARY not in log.read_text(encoding="utf-8")
