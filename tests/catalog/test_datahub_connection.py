"""Connection settings are read as DataHub's own CLI reads them, and the token never shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from datahub.cli import config_utils

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import (
    DataHubSettings,
    display_url,
    settings_from_spec,
)
from mlcopilot.errors import ConfigError, UsageError
from mlcopilot.scan.wiring import open_catalog, parse_catalog_spec

TOKEN = "eyJhbGciOiJIUzI1NiJ9.secret-canary-token"


@pytest.fixture
def datahubenv(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``~/.datahubenv`` in the test's home (the SDK computes its path at import time)."""
    path = isolated_home / ".datahubenv"
    monkeypatch.setattr(config_utils, "DATAHUB_CONFIG_PATH", str(path))
    for name in ("DATAHUB_GMS_HOST", "DATAHUB_GMS_PORT", "DATAHUB_GMS_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    return path


def test_url_spec_takes_the_token_from_the_environment(
    datahubenv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATAHUB_GMS_TOKEN", TOKEN)
    settings = settings_from_spec("http://gms.example:8080/")
    assert settings.server == "http://gms.example:8080"
    assert settings.token == TOKEN
    assert TOKEN not in repr(settings)


def test_bare_spec_reads_the_environment(datahubenv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATAHUB_GMS_URL", "http://env-gms:8080")
    monkeypatch.setenv("DATAHUB_GMS_TOKEN", TOKEN)
    settings = settings_from_spec("")
    assert (settings.server, settings.token, settings.source) == (
        "http://env-gms:8080",
        TOKEN,
        "DATAHUB_GMS_URL",
    )


def test_bare_spec_falls_back_to_datahubenv(datahubenv: Path) -> None:
    datahubenv.write_text(f"gms:\n  server: http://file-gms:8080\n  token: {TOKEN}\n")
    settings = settings_from_spec("")
    assert (settings.server, settings.token, settings.source) == (
        "http://file-gms:8080",
        TOKEN,
        "~/.datahubenv",
    )


def test_datahubenv_token_only_goes_to_its_own_server(datahubenv: Path) -> None:
    datahubenv.write_text(f"gms:\n  server: http://file-gms:8080\n  token: {TOKEN}\n")
    assert settings_from_spec("http://file-gms:8080").token == TOKEN
    assert settings_from_spec("http://elsewhere:8080").token is None


def test_nothing_configured_says_what_to_set(datahubenv: Path) -> None:
    with pytest.raises(ConfigError, match="DATAHUB_GMS_URL"):
        settings_from_spec("")


def test_malformed_datahubenv_is_a_config_error(datahubenv: Path) -> None:
    datahubenv.write_text("gms:\n  token: 42\n")
    with pytest.raises(ConfigError, match="datahubenv"):
        settings_from_spec("")


@pytest.mark.parametrize("location", ["localhost:8080", "ftp://gms", "http://", "gms"])
def test_url_must_be_http(location: str, datahubenv: Path) -> None:
    with pytest.raises(ConfigError, match="GMS URL"):
        settings_from_spec(location)


@pytest.mark.parametrize(
    "location",
    ["http://admin:PW@gms:8080/?token=CANARYQ", "http://gms:8080/api?x=1", "http://gms#CANARYQ"],
)
def test_a_query_string_or_fragment_is_refused_up_front(location: str, datahubenv: Path) -> None:
    """The SDK appends its paths to the URL (``/?token=x/api/graphql``): refused, unrepeated."""
    with pytest.raises(ConfigError, match="takes no query string or fragment") as caught:
        settings_from_spec(location)
    assert "CANARYQ" not in str(caught.value)
    assert "PW" not in str(caught.value)


def test_display_url_drops_credentials() -> None:
    assert display_url("https://user:pass@gms.example:8443/api/gms?x=1") == (
        "https://gms.example:8443/api/gms"
    )


def test_wiring_opens_datahub_without_io(datahubenv: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATAHUB_GMS_TOKEN", TOKEN)
    # Port 9 (discard) is never contacted: constructing the catalog does no I/O.
    catalog = open_catalog("datahub:http://127.0.0.1:9")
    assert isinstance(catalog, DataHubCatalog)
    assert catalog.label == "datahub:http://127.0.0.1:9"
    catalog.close()
    assert parse_catalog_spec("datahub:") == ("datahub", "")
    with pytest.raises(UsageError):
        parse_catalog_spec("lite:")


def test_label_never_holds_the_token_or_credentials() -> None:
    settings = DataHubSettings("https://bot:pw@gms.example", token=TOKEN)
    catalog = DataHubCatalog.from_settings(settings)
    assert catalog.label == "datahub:https://gms.example"
    assert TOKEN not in repr(settings)
    catalog.close()
