"""Which URLs and addresses the sinks may talk to: an allowlist (SSRF guard).

Checked twice. When the configuration is read (:func:`check_url`): a webhook or API base URL
must be ``https``, carry no ``user@`` part, and either match a default host and path prefix
(GitHub, Slack, GovSlack) on the default port, or be one of the operator's own endpoints named
in ``notify.allowed_hosts`` (a host, a ``host:port``, or a CIDR network for IP literals) —
GitHub Enterprise Server on ``https://10.20.30.40`` or ``:8443``. And when a connection is made
(:func:`mlcopilot.notify.sinks.http.connect`, by :class:`AddressPolicy`): the name is resolved
and every address it resolves to must be public, unless the name itself or the address is
allowlisted — so a default name that DNS points at an internal address (rebinding, a poisoned
resolver) is refused, and the connection goes to the address that was checked. Redirects are
never followed (the clients' job, tested there).

``allow_local`` is for tests against local fakes only: plain ``http`` on a loopback address,
any port and path. Error messages show the scheme and host only: a webhook URL's path is its
secret.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from mlcopilot.errors import ConfigError
from mlcopilot.settings import HostRule, host_rule

GITHUB_API = ("api.github.com", "/")
SLACK_API = ("slack.com", "/api/")
SLACK_WEBHOOK = ("hooks.slack.com", "/services/")
# GovSlack runs apart from slack.com on its own domain, slack-gov.com (Slack's GovSlack docs).
SLACK_GOV_API = ("slack-gov.com", "/api/")
SLACK_GOV_WEBHOOK = ("hooks.slack-gov.com", "/services/")
PAGERDUTY_EVENTS = ("events.pagerduty.com", "/")
PAGERDUTY_EU_EVENTS = ("events.eu.pagerduty.com", "/")
# Teams Workflows webhooks (Power Automate): prod-NN.REGION.logic.azure.com/workflows/… and the
# newer …environment.api.powerplatform.com/powerautomate/…; a leading dot matches subdomains.
TEAMS_LOGIC_APPS = (".logic.azure.com", "/workflows/")
TEAMS_POWER_PLATFORM = (".api.powerplatform.com", "/powerautomate/")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_HTTPS = 443

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def allowlist(entries: Sequence[str], *, what: str) -> tuple[HostRule, ...]:
    """The parsed entries; ConfigError names ``what`` and the bad entry."""
    rules = []
    for entry in entries:
        try:
            rules.append(host_rule(entry))
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from None
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Which resolved addresses a connection may reach."""

    rules: tuple[HostRule, ...] = ()
    allow_loopback: bool = False
    """Tests against local fakes only."""

    @classmethod
    def of(cls, entries: Sequence[str], *, allow_loopback: bool = False) -> AddressPolicy:
        """The policy for ``notify.allowed_hosts`` entries (ConfigError on a bad one)."""
        rules = allowlist(entries, what="notify.allowed_hosts")
        return cls(rules=rules, allow_loopback=allow_loopback)

    def admits(self, host: str, address: IPAddress) -> bool:
        """May ``host``, resolved to ``address``, be connected to?"""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address.is_global:
            return True
        if self.allow_loopback and address.is_loopback:
            return True
        host = host.lower().strip("[]")
        for rule in self.rules:
            if rule.host is not None and rule.host in (host, str(address)):
                return True  # the operator named this host (or this very address)
            if rule.network is not None and address in rule.network:
                return True
        return False


def check_url(
    url: str,
    *,
    what: str,
    allowed: Sequence[tuple[str, str]],
    rules: Sequence[HostRule] = (),
    rule_prefix: str = "/",
    allow_local: bool = False,
) -> str:
    """Return ``url`` when it may be used for ``what``; raise ConfigError (no secret) if not.

    Args:
        url: The configured URL.
        what: The setting's name, for the message.
        allowed: The default ``(host, path prefix)`` pairs (default port, public addresses); a
            host with a leading dot (``.logic.azure.com``) admits its subdomains.
        rules: The operator's allowlist (``notify.allowed_hosts``): a host entry admits that
            host (its port, else 443), a network entry admits IP literals in it on port 443;
            internal addresses included.
        rule_prefix: The path an allowlisted host's URL must start with (``/api/v3`` for GHES).
        allow_local: Tests only: also allow ``http`` on a loopback address, any port and path.
    """
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port or _HTTPS
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
    path = parts.path or "/"
    if _allowlisted(rules, host, port) and path.startswith(rule_prefix):
        return url.strip()
    if port != _HTTPS:
        raise ConfigError(
            f"{what}: only the default https port is allowed ({shown}:{port}); to use your own "
            f"endpoint add {host}:{port} to notify.allowed_hosts"
        )
    if _internal_ip(host):
        raise ConfigError(
            f"{what}: {shown} is an internal address and is not allowed unless "
            "notify.allowed_hosts names it"
        )
    for allowed_host, prefix in allowed:
        if _host_matches(host, allowed_host.lower()) and path.startswith(prefix):
            return url.strip()
    expected = ", ".join(f"https://{h}{p}…" for h, p in allowed)
    raise ConfigError(
        f"{what}: {shown} is not an allowed address (expected {expected}, or a host "
        f"notify.allowed_hosts names, with {rule_prefix}…)"
    )


def _host_matches(host: str, allowed: str) -> bool:
    if allowed.startswith("."):
        return host.endswith(allowed) and len(host) > len(allowed)
    return host == allowed


def operator_url(
    url: str,
    *,
    what: str,
    rules: Sequence[HostRule] = (),
    allow_local: bool = False,
) -> str:
    """``url`` when it may be an operator-chosen endpoint (the signed webhook's receiver).

    The operator names the host, so any public ``https`` host on the default port is allowed;
    another port or an internal address only when ``notify.allowed_hosts`` names it (and the
    connection is checked again after DNS, as for every sink).
    """
    try:
        host = (urlsplit(url.strip()).hostname or "").lower()
    except ValueError:
        raise ConfigError(f"{what} is not a valid URL") from None
    return check_url(
        url,
        what=what,
        allowed=[(host, "/")] if host and not _internal_ip(host) else [],
        rules=rules,
        allow_local=allow_local,
    )


def _allowlisted(rules: Sequence[HostRule], host: str, port: int) -> bool:
    literal = _ip(host)
    for rule in rules:
        if rule.host is not None:
            admitted = rule.host == (str(literal) if literal else host) and (
                (rule.port or _HTTPS) == port
            )
        else:  # a network admits IP literals in it, on the default port
            network = rule.network
            admitted = (
                network is not None
                and literal is not None
                and literal in network
                and port == _HTTPS
            )
        if admitted:
            return True
    return False


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _internal_ip(host: str) -> bool:
    address = _ip(host)
    return address is not None and not address.is_global
