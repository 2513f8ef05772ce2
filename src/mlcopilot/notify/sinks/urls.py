"""Which URLs and addresses the sinks may talk to: an allowlist (SSRF guard).

Checked twice. When the configuration is read (:func:`check_url`): a webhook or API base URL
must be ``https``, carry no ``user@`` part, and either match a default host and path prefix
(GitHub, Slack, GovSlack) on the default port, or be one of the operator's own endpoints named
in ``notify.allowed_hosts`` (a host, a ``host:port``, or a CIDR network for IP literals) —
GitHub Enterprise Server on ``https://10.20.30.40`` or ``:8443``. And when a connection is made
(:func:`connect`): the name is resolved and every address it resolves to must be public,
unless the name itself or the address is allowlisted — so a default name that DNS points at
an internal address (rebinding, a poisoned resolver) is refused, and the connection goes to
the address that was checked. Redirects are never followed (the clients' job, tested there).

``allow_local`` is for tests against local fakes only: plain ``http`` on a loopback address,
any port and path. Error messages show the scheme and host only: a webhook URL's path is its
secret.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mlcopilot.errors import ConfigError
from mlcopilot.settings import HostRule, host_rule

GITHUB_API = ("api.github.com", "/")
SLACK_API = ("slack.com", "/api/")
SLACK_WEBHOOK = ("hooks.slack.com", "/services/")
# GovSlack runs apart from slack.com on its own domain, slack-gov.com (Slack's GovSlack docs).
SLACK_GOV_API = ("slack-gov.com", "/api/")
SLACK_GOV_WEBHOOK = ("hooks.slack-gov.com", "/services/")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_HTTPS = 443

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., list[tuple[Any, ...]]]


class RefusedAddress(OSError):
    """A name resolved to an address the allowlist does not admit (no connection was made)."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(
            f"{host} resolves to {address}, an internal address: not allowed unless "
            "notify.allowed_hosts names the host or its network"
        )
        self.host = host
        self.address = address


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
        allowed: The default ``(host, path prefix)`` pairs (default port, public addresses).
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
        if host == allowed_host.lower() and path.startswith(prefix):
            return url.strip()
    expected = ", ".join(f"https://{h}{p}…" for h, p in allowed)
    raise ConfigError(
        f"{what}: {shown} is not an allowed address (expected {expected}, or a host "
        f"notify.allowed_hosts names, with {rule_prefix}…)"
    )


def connect(
    host: str,
    port: int,
    *,
    timeout: float | None,
    policy: AddressPolicy,
    source_address: tuple[str, int] | None = None,
    resolve: Resolver = socket.getaddrinfo,
) -> socket.socket:
    """Resolve ``host``, refuse it if any address is not admitted, connect to a checked one.

    As :func:`socket.create_connection`, but the addresses are checked first (all of them: a
    name with one internal answer is not trusted for its others) and the socket connects to
    the very address that was checked, so a second lookup cannot swap it. Both clients use it:
    Slack's (urllib, :mod:`~mlcopilot.notify.sinks.slack_http`) and GitHub's (httpcore,
    :mod:`~mlcopilot.notify.sinks.deadline`).

    Raises:
        RefusedAddress: an address the policy does not admit.
        OSError: no address could be connected to.
    """
    answers = resolve(host, port, 0, socket.SOCK_STREAM)
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if not policy.admits(host, address):
            raise RefusedAddress(host, str(address))
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in answers:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            if source_address is not None:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last or OSError(f"{host}: no address to connect to")


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
