"""A fast start: ``mlcopilot --help`` and ``mlcopilot checks`` load no backend.

What keeps them fast is what they do not import: the DataHub SDK, SQLAlchemy, MCP and the
GitHub and Slack clients each cost tenths of a second. So this asserts on ``sys.modules`` in
a fresh interpreter (a timing would be flaky); ``benchmarks/startup.py`` measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TypedDict

import pytest

HEAVY = ("datahub", "sqlalchemy", "alembic", "mcp", "githubkit", "slack_sdk")

PROBE = """
import json, sys
from typer.testing import CliRunner
from mlcopilot.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"exit": result.exit_code, "output": result.output, "heavy": heavy}}))
"""


class Probe(TypedDict):
    exit: int
    output: str
    heavy: list[str]


def run_in_fresh_interpreter(*args: str) -> Probe:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: Probe = json.loads(completed.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("--help",), "Watch what feeds your ML models in DataHub"),
        (("checks",), "schema_drift"),
        (("scan", "--help"), "--fail-on"),
    ],
)
def test_the_command_starts_without_loading_a_backend(args: tuple[str, ...], shown: str) -> None:
    result = run_in_fresh_interpreter(*args)

    assert result["exit"] == 0
    assert shown in result["output"]
    assert result["heavy"] == []


def test_the_probe_sees_a_backend_when_a_command_loads_one() -> None:
    # The same probe on a command that opens the state store (an empty one: it says so and
    # exits 2): SQLAlchemy is loaded. Without this, a probe that never saw any module would
    # pass the test above whatever happened.
    result = run_in_fresh_interpreter("incidents", "list", "--state-url", "sqlite://")

    assert "holds no mlcopilot state" in result["output"]
    assert "sqlalchemy" in result["heavy"]
