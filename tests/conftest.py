"""Guard rails for every test: no writes to the real home, no telemetry, a clean environment."""

from __future__ import annotations

from pathlib import Path

import pytest

# testing.report_contract: every JSON scan report a test produces is checked against its schema.
pytest_plugins = ["standin.fixtures", "testing.report_contract"]

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "datahub-samples"
DEMO_DATA = REPO / "src" / "mlcopilot" / "demo_data"


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """HOME and MLCOPILOT_HOME point into a temp dir (DataHub's SDK writes ~/.datahub)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MLCOPILOT_HOME", str(home / ".mlcopilot"))
    monkeypatch.setenv("DATAHUB_TELEMETRY_ENABLED", "false")
    for name in (
        "MLCOPILOT_CATALOG",
        "MLCOPILOT_STATE_URL",
        "MLCOPILOT_CONFIG",
        "DATAHUB_GMS_URL",
        "DATAHUB_GMS_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    return home
