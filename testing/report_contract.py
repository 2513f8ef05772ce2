"""Every JSON scan report the test suite produces is held to the schema the package ships.

A pytest plugin (``tests/conftest.py`` loads it): an autouse fixture checks each report as it
is made, whichever test makes it —

- a ``scan ... --format json`` run of the command (``testing.installed_cli``'s runs call
  :func:`check_completed`; a test's own ``subprocess.run`` is checked too): its stdout, or its
  ``--output`` file;
- a report built in-process (``mlcopilot.report.json.report_dict``, which
  ``render_json`` goes through).

Version 3 is validated against ``mlcopilot/schemas/report-v3.json`` (draft 2020-12: the schema
the report's models generate, ``mlcopilot.report.models``; a test keeps the shipped file equal to
it) and must read back into those models; a report asked for as version 1 or 2
(``--json-version``) must have exactly that version's keys.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import pytest
from jsonschema import Draft202012Validator

OLDER_KEYS = {
    1: {"version", "now", "catalog", "models", "incidents"},
    2: {"version", "now", "catalog", "models", "incidents", "summary", "notes"},
}
"""The top-level keys of the versions before 3 (which have no shipped schema)."""


@cache
def validator() -> Draft202012Validator:
    from mlcopilot.report.json import report_schema

    schema = report_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def check_report(report: Any, *, where: str = "report") -> None:
    """Fail (AssertionError) with every way ``report`` breaks its version's contract."""
    version = report.get("version") if isinstance(report, dict) else None
    if version in OLDER_KEYS:
        assert set(report) == OLDER_KEYS[version], f"{where}: version {version} keys"
        return
    problems = sorted(
        f"{'/'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message}"
        for error in validator().iter_errors(report)
    )
    assert not problems, f"{where} breaks schemas/report-v3.json:\n" + "\n".join(problems)
    from mlcopilot.report.models import Report

    Report.model_validate(report)  # what a Python reader, or the MCP answers' models, read


def scan_json_output(args: Sequence[str]) -> tuple[bool, Path | None]:
    """Whether ``args`` run ``scan --format json``, and the ``--output`` file it names."""
    args = [str(a) for a in args]
    if "scan" not in args:
        return False, None
    rest = args[args.index("scan") + 1 :]
    values = _options(rest)
    output = values.get("--output")
    return values.get("--format") == "json", Path(output) if output else None


def _options(args: Sequence[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for i, arg in enumerate(args):
        if "=" in arg and arg.startswith("--"):
            name, _, value = arg.partition("=")
            values[name] = value
        elif arg.startswith("--") and i + 1 < len(args):
            values[arg] = args[i + 1]
    return values


class Finished(Protocol):
    """A finished run of the command: a subprocess, or ``testing.installed_cli.Ran``."""

    @property
    def stdout(self) -> Any: ...


def check_completed(args: Any, done: Finished, cwd: Any) -> None:
    """Check the report a finished ``scan --format json`` run wrote, if it wrote one."""
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        return
    is_json, output = scan_json_output(args)
    if not is_json:
        return
    if output is not None:
        path = output if output.is_absolute() or cwd is None else Path(cwd) / output
        if path.is_file():
            check_report(json.loads(path.read_text(encoding="utf-8")), where=str(output))
        return
    stdout = done.stdout
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8")
    if stdout and stdout.strip():  # a failed scan (exit 2, 3, 4) writes no report
        check_report(json.loads(stdout), where="stdout of " + " ".join(map(str, args)))


@pytest.fixture(autouse=True)
def scan_reports_follow_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Check every JSON scan report this test produces (see the module docstring)."""
    from mlcopilot.report import json as report_module

    real_run = subprocess.run
    real_report_dict = report_module.report_dict

    def run(*args: Any, **kwargs: Any) -> Any:
        done = real_run(*args, **kwargs)
        command = args[0] if args else kwargs.get("args")
        check_completed(command, done, kwargs.get("cwd"))
        return done

    def report_dict(*args: Any, **kwargs: Any) -> dict[str, Any]:
        made = real_report_dict(*args, **kwargs)
        # The report as a reader gets it: through JSON (tuples are lists there).
        check_report(json.loads(json.dumps(made)), where="report_dict()")
        return made

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(report_module, "report_dict", report_dict)
