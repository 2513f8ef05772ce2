"""Which URLs the sinks may talk to: an allowlist, checked before any request (SSRF guard).

A webhook or API base URL from configuration must be ``https``, carry no ``user@`` part, use the
default port and match an allowlisted host and path prefix. IP literals in private, loopback,
link-local (cloud metadata) or reserved ranges are refused. Only tests may allow plain-http
loopback servers, through an explicit setting. Error messages show the scheme and host only:
a webhook URL's path is its secret.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from mlcopilot.errors import ConfigError

GITHUB_API = ("api.github.com", "/")
SLACK_API = ("slack.com", "/api/")
SLACK_WEBHOOK = ("hooks.slack.com", "/services/")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def check_url(
    url: str, *, what: str, allowed: Sequence[tuple[str, str]], allow_local: bool = False
) -> str:
    """Return ``url`` when it may be used for ``what``; raise ConfigError (no secret) if not.

    Args:
        url: The configured URL.
        what: The setting's name, for the message.
        allowed: ``(host, path prefix)`` pairs.
        allow_local: Tests only: also allow ``http`` on a loopback address, any port and path.
    """
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        raise ConfigError(f"{what} is not a valid URL") from None
    shown = f"{parts.scheme}://{host}" if host else "it"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ConfigError(f"{what}: a URL with user@ credentials is not allowed ({shown})")
    local = allow_local and host in _LOOPBACK_NAMES
    if parts.scheme != "https" and not (local and parts.scheme == "http"):
        raise ConfigError(f"{what} must be an https:// URL ({shown} is not)")
    if local:
        return url.strip()
    if port is not None and port != 443:
        raise ConfigError(f"{what}: only the default https port is allowed ({shown}:{port})")
    _refuse_internal_ip(host, what, shown)
    path = parts.path or "/"
    for allowed_host, prefix in allowed:
        if host == allowed_host.lower() and path.startswith(prefix):
            return url.strip()
    expected = ", ".join(f"https://{h}{p}…" for h, p in allowed)
    raise ConfigError(f"{what}: {shown} is not an allowed address (expected {expected})")


def _refuse_internal_ip(host: str, what: str, shown: str) -> None:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return
    if not address.is_global:
        raise ConfigError(f"{what}: {shown} is an internal address and is not allowed")
