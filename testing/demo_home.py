"""The demo's catalog in an ``MLCOPILOT_HOME``, for tests that run the installed command.

``demo_home`` loads ``demo_data/01_catalog.json`` once per test module (the load runs the
command, which is slow); ``demo`` gives each test its own copy of that home, so a test that
scans (and records incidents) never sees another's state. ``tests/cli/conftest.py`` offers
both to the cli tests; a module elsewhere imports them by name.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testing.installed_cli import run_cli

DEMO_DATA = Path(__file__).resolve().parents[1] / "src" / "mlcopilot" / "demo_data"


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's catalog, loaded once for the module (each test scans a copy: ``demo``)."""
    home = tmp_path_factory.mktemp("demo") / "home"
    loaded = run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    assert loaded.code == 0, loaded.stderr
    return home


@pytest.fixture
def demo(tmp_path: Path, demo_home: Path) -> Path:
    """A home (``tmp_path/home``) whose catalog is the demo's: one model, two high findings."""
    home = tmp_path / "home"
    shutil.copytree(demo_home, home)
    return home
