"""Where a DataHub server is and how to authenticate to it, read as DataHub's own CLI reads it.

``datahub:`` alone takes the server from mlcopilot's settings (``DATAHUB_GMS_URL``, or
``[datahub] gms_url`` in the configuration file) and the token from ``DATAHUB_GMS_TOKEN`` (or
``DATAHUB_GMS_TOKEN_FILE``); when they name no server, from ``~/.datahubenv`` (or
``DATAHUB_GMS_HOST``/``PORT``/``PROTOCOL``) through acryl-datahub's own loader, so mlcopilot
and the ``datahub`` CLI always agree. ``datahub:URL`` names the server; the token still comes
from the settings, or from ``~/.datahubenv`` when that file is about the same server (a token
is never sent to a server it was not configured for).

The token is kept out of ``repr`` and every message; it is only ever put in the
``Authorization`` header by the SDK.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field

from datahub.cli import config_utils
from datahub.ingestion.auth.env import build_auth_config_from_env
from datahub.ingestion.graph.config import DatahubClientConfig

from mlcopilot.errors import ConfigError
from mlcopilot.settings import Settings, load_settings


@dataclass(frozen=True, slots=True)
class DataHubSettings:
    """One DataHub GMS endpoint and its credentials."""

    server: str
    """The GMS base URL, e.g. ``http://localhost:8080`` (no trailing slash)."""
    token: str | None = field(default=None, repr=False)
    """A personal access token, or None when the server runs without authentication."""
    source: str = "--catalog"
    """Where the server came from, for messages (``DATAHUB_GMS_URL``, ``~/.datahubenv``)."""
    auth: object | None = field(default=None, repr=False)
    """An OAuth token provider config from ``DATAHUB_AUTH_TYPE`` (acryl-datahub's
    ``AuthConfig``), used instead of ``token``; opaque to everything but the client."""

    @property
    def display_url(self) -> str:
        """The server URL as it may be shown: without any ``user:password@`` part."""
        return display_url(self.server)

    def client_config(self, **options: object) -> DatahubClientConfig:
        """The SDK's client config for these settings plus ``options`` (timeouts, retries)."""
        return DatahubClientConfig(server=self.server, token=self.token, auth=self.auth, **options)


def settings_from_spec(location: str, settings: Settings | None = None) -> DataHubSettings:
    """The settings for ``--catalog datahub:LOCATION``.

    Args:
        location: What follows ``datahub:``; empty means ``datahub.gms_url``
            (``DATAHUB_GMS_URL`` or the configuration file), else "as DataHub's CLI is
            configured" (``~/.datahubenv``, through acryl-datahub's own loader).
        settings: mlcopilot's settings; None reads them (environment and file) now.

    Raises:
        ConfigError: when no server is configured, the URL is not http(s), or
            ``~/.datahubenv`` cannot be read.
    """
    settings = settings if settings is not None else load_settings()
    section = settings.datahub
    token = section.token.get_secret_value() if section.token is not None else None
    if location.strip():
        server, source = normalize_url(location), "--catalog"
    elif section.gms_url:
        server, source = normalize_url(section.gms_url), settings.name_of("datahub.gms_url")
        # DATAHUB_AUTH_TYPE (OAuth token providers) is DataHub's own; its SDK reads it.
        auth = build_auth_config_from_env()
        if auth is not None:
            return DataHubSettings(server=server, source=source, auth=auth)
    else:
        return settings_from_datahubenv()
    return DataHubSettings(
        server=server, token=token or _datahubenv_token_for(server), source=source
    )


def settings_from_datahubenv() -> DataHubSettings:
    """The server and token DataHub's CLI would use when mlcopilot's settings name none.

    acryl-datahub's own loader reads ``~/.datahubenv`` (and DataHub's other variables:
    ``DATAHUB_GMS_HOST``/``PORT``, ``DATAHUB_AUTH_TYPE``), so mlcopilot and the ``datahub``
    CLI always agree.

    Raises:
        ConfigError: when nothing configures a server, or ``~/.datahubenv`` is malformed.
    """
    from_env = config_utils.get_url_from_env() is not None
    config = _load_client_config()
    return DataHubSettings(
        server=normalize_url(config.server),
        token=config.token or None,
        source="DATAHUB_GMS_HOST" if from_env else config_utils.CONDENSED_DATAHUB_CONFIG_PATH,
        auth=config.auth,
    )


def normalize_url(url: str) -> str:
    """``url`` without trailing slashes; an http(s) URL with a host, or ConfigError.

    A query string or a fragment is refused, before anything connects: the SDK appends its
    paths to the URL (``/?token=x`` would become ``/?token=x/api/graphql``, a request GMS
    does not serve), and a token in a query string would travel in every request line and
    log. The message never repeats the query string.
    """
    url = url.strip().rstrip("/")
    try:
        parsed = urllib.parse.urlsplit(url)
        hostname = parsed.hostname
    except ValueError:  # e.g. a port that is no number, or an unclosed [v6 address
        parsed, hostname = None, None
    if parsed is None or parsed.scheme not in ("http", "https") or not hostname:
        raise ConfigError(
            f"datahub:{display_url(url)}: expected the DataHub GMS URL, "
            "e.g. datahub:http://localhost:8080"
        )
    if "?" in url or "#" in url:
        raise ConfigError(
            f"datahub:{display_url(url)}: the DataHub GMS URL takes no query string or "
            "fragment (?… or #…): give the server's base URL, e.g. datahub:http://localhost:8080, "
            "and the token in DATAHUB_GMS_TOKEN"
        )
    return url


def display_url(url: str) -> str:
    """``url`` with any ``user:password@`` part and query string removed, for messages."""
    try:
        parsed = urllib.parse.urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    try:
        host = parsed.hostname or ""
        netloc = f"{host}:{parsed.port}" if parsed.port else host
    except ValueError:  # a port that is no number
        return "<invalid URL>"
    if ":" in host:  # an IPv6 address goes back in brackets
        netloc = f"[{host}]" + netloc[len(host) :]
    return urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", ""))


def _load_client_config() -> DatahubClientConfig:
    try:
        return config_utils.load_client_config()
    except config_utils.MissingConfigError as exc:
        raise ConfigError(
            "no DataHub server configured: set DATAHUB_GMS_URL (and DATAHUB_GMS_TOKEN), run "
            "`datahub init`, or pass --catalog datahub:URL"
        ) from exc
    except SystemExit as exc:
        # The SDK prints the validation error and exits when ~/.datahubenv is malformed.
        raise ConfigError(
            f"{config_utils.CONDENSED_DATAHUB_CONFIG_PATH} is not a valid DataHub CLI "
            "config; fix it or run `datahub init`"
        ) from exc


def _datahubenv_token_for(server: str) -> str | None:
    """The token in ``~/.datahubenv`` if that file configures ``server``; else None."""
    try:
        raw = config_utils.get_raw_client_config()
    except OSError:
        return None
    gms = raw.get("gms") if isinstance(raw, dict) else None
    if not isinstance(gms, dict) or not isinstance(gms.get("server"), str):
        return None
    if gms["server"].strip().rstrip("/") != server:
        return None
    token = gms.get("token")
    return token if isinstance(token, str) and token else None
