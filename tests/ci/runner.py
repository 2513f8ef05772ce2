"""A fake GitHub runner for ``action.yml``: its run step, executed as the runner would.

The step's ``env:`` is filled in from ``action.yml`` itself (each ``${{ inputs.NAME }}`` from
the inputs given, else the input's default), and its ``run:`` line is run with bash from a
workspace, with ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``, ``RUNNER_TEMP`` and
``GITHUB_ACTION_PATH`` (the checkout) set: what a workflow's ``uses:`` would run, less
actions/setup-python, which ``install: false`` or a stand-in interpreter replaces.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

ACTION_FILE = REPO / "action.yml"
SCRIPT = REPO / "scripts" / "github-action.sh"
VENV_BIN = Path(sys.executable).parent
"""Where the project's installed ``mlcopilot`` is."""

_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def action() -> dict[str, Any]:
    """``action.yml``, parsed."""
    loaded: dict[str, Any] = yaml.safe_load(ACTION_FILE.read_text(encoding="utf-8"))
    return loaded


def step(step_id: str) -> dict[str, Any]:
    """The step of ``action.yml`` with this ``id``."""
    [found] = [s for s in action()["runs"]["steps"] if s.get("id") == step_id]
    return dict(found)


@dataclass(frozen=True)
class Ran:
    """One run of the action's step: exit code, log, outputs and the job summary."""

    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    workspace: Path
    runner_temp: Path

    def file(self, output: str) -> Path:
        """The file an output names, as the workflow's next step resolves it."""
        assert self.outputs[output], f"output {output} is empty"
        return self.workspace / self.outputs[output]


def parse_outputs(text: str) -> dict[str, str]:
    """A ``$GITHUB_OUTPUT`` file as the runner reads it: ``k=v`` and ``k<<DELIM`` blocks."""
    outputs: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            value: list[str] = []
            for each in lines:
                if each == delimiter:
                    break
                value.append(each)
            else:
                raise AssertionError(f"output {key}: no closing delimiter")
            outputs[key] = "\n".join(value)
        else:
            key, value_text = line.split("=", 1)
            outputs[key] = value_text
    return outputs


def step_env(inputs: Mapping[str, str], python_path: str = "") -> dict[str, str]:
    """The ``env:`` of the gate step with its expressions evaluated as GitHub would."""
    declared = action()["inputs"]
    unknown = set(inputs) - set(declared)
    assert not unknown, f"not inputs of action.yml: {unknown}"
    values = {name: str(spec.get("default", "")) for name, spec in declared.items()}
    values.update(inputs)

    def evaluate(match: re.Match[str]) -> str:
        expression = match[1]
        if expression.startswith("inputs."):
            return values[expression.removeprefix("inputs.")]
        if expression == "steps.python.outputs.python-path":
            return python_path
        raise AssertionError(f"the simulation cannot evaluate ${{{{ {expression} }}}}")

    env = step("gate")["env"]
    return {key: _EXPRESSION.sub(evaluate, str(value)) for key, value in env.items()}


def run_action(
    tmp_path: Path,
    inputs: Mapping[str, str],
    *,
    path: str | None = None,
    python_path: str = "",
    summary_before: str = "",
    env: Mapping[str, str] | None = None,
) -> Ran:
    """Run the gate step under a fake runner rooted in ``tmp_path``.

    ``path`` is the runner's PATH (default: the project's installed ``mlcopilot`` first);
    ``env`` is the calling step's ``env:`` (a composite action's steps see it). The environment
    is otherwise only what a runner sets, so nothing of this machine's leaks in.
    """
    workspace = tmp_path / "workspace"
    runner_temp = tmp_path / "runner-temp"
    for folder in (workspace, runner_temp):
        folder.mkdir(exist_ok=True)
    outputs = tmp_path / "github-output"
    summary = tmp_path / "step-summary.md"
    outputs.write_text("", encoding="utf-8")
    summary.write_text(summary_before, encoding="utf-8")
    environment = {
        **(env or {}),
        "PATH": path if path is not None else f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": os.environ["HOME"],  # the test's own (tests/conftest.py)
        "LANG": "C.UTF-8",
        "DATAHUB_TELEMETRY_ENABLED": "false",
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_ACTION_PATH": str(REPO),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(runner_temp),
        **step_env(inputs, python_path),
    }
    done = subprocess.run(
        ["bash", "-c", step("gate")["run"]],
        cwd=workspace,
        env=environment,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return Ran(
        done.returncode,
        done.stdout,
        done.stderr,
        parse_outputs(outputs.read_text(encoding="utf-8")),
        summary.read_text(encoding="utf-8"),
        workspace,
        runner_temp,
    )
