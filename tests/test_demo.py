"""The demo a new user runs first, and the metadata files it ships."""

from __future__ import annotations

import runpy
import subprocess
import sys

from tests.conftest import DEMO_DATA, REPO


def test_shipped_demo_files_are_what_the_generator_builds() -> None:
    builder = runpy.run_path(str(REPO / "scripts" / "build_demo_data.py"))
    for name, build in builder["FILES"].items():
        assert (DEMO_DATA / name).read_text(encoding="utf-8") == builder["render"](build), name


def test_demo_tells_the_whole_story(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mlcopilot", "demo", "--home", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"COLUMNS": "160", **dict(__import__("os").environ)},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for expected in (
        "pii_exposure",
        "stale_source",
        "deprecated_source",
        "schema_drift",
        "signup_date",
        "country_code",
        "mlcopilot-schema-drift",
        "datahub lite get --urn",
        "Resolved:",
    ):
        assert expected in out, expected
    # The story's numbers: 3 incidents at first, 2 more on drift, 1 resolved at the end.
    assert "Incidents: 3 opened, 0 still open, 0 resolved." in out
    assert "Incidents: 2 opened, 3 still open, 0 resolved." in out
    assert "Incidents: 0 opened, 4 still open, 1 resolved." in out
    # A second run starts from scratch and tells the same story.
    again = subprocess.run(
        [sys.executable, "-m", "mlcopilot", "demo", "--home", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "Incidents: 3 opened, 0 still open, 0 resolved." in again.stdout
