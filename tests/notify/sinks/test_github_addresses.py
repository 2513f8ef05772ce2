"""Where GitHub calls may go: the API's name is checked after resolution, where the connection
is made, with the same allowlist (``notify.allowed_hosts``) and helper as Slack's (issue 11).

No real DNS beyond the machine: ``localhost`` is resolved by the machine, other names by a
resolver the test injects.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from mlcopilot.incidents.payload import OutboxStatus
from mlcopilot.model import Severity
from mlcopilot.notify.relay import RelayReport
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.github import GitHubSink
from mlcopilot.notify.sinks.http import DeadlineTransport, RefusedAddress
from mlcopilot.notify.sinks.urls import AddressPolicy
from testing.fakes.github import FakeGitHub
from testing.fakes.http import FakeServer
from testing.notify_world import CUSTOMERS, FakeClock, Script, World, world

PII: Script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
ISSUES = r"/repos/acme/ml-alerts/issues"


def sink_at(w: World, url: str, **settings: Any) -> GitHubSink:
    gh = w.settings().github
    assert gh is not None
    fields = {"api_url": url, "allow_local": False, **settings}
    return GitHubSink(gh.model_copy(update=fields), clock=w.clock)


def scan_with(w: World, sink: GitHubSink) -> RelayReport:
    w.script = PII
    result = w.scan(sinks=[sink])
    assert result.relay is not None
    return result.relay


def answers(*addresses: str) -> Any:
    """A resolver that answers every name with ``addresses`` (DNS pointed somewhere)."""

    def resolve(host: str, port: int, *args: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    return resolve


def client(entries: Sequence[str], *resolved: str) -> httpx.Client:
    transport = DeadlineTransport(
        5.0,
        base_url="https://ghe.corp",
        policy=AddressPolicy.of(entries),
        resolve=answers(*resolved),
    )
    return httpx.Client(transport=transport)


def test_a_name_resolving_to_loopback_is_refused_and_nothing_is_sent(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        port = w.github.url.rsplit(":", 1)[1]
        report = scan_with(w, sink_at(w, f"http://localhost:{port}"))
        ((row, error),) = report.dead
        assert "localhost resolves to 127.0.0.1, an internal address" in error
        assert "notify.allowed_hosts" in error
        assert w.github.requests == []  # refused before connecting
        assert row.attempts == 1  # permanent: dead at once, not retried against the same DNS


@pytest.mark.parametrize("entry", ["localhost", "127.0.0.0/8"])
def test_a_name_resolving_inside_is_admitted_by_its_name_or_its_network(
    tmp_path: Path, entry: str
) -> None:
    with world(tmp_path) as w:
        port = w.github.url.rsplit(":", 1)[1]
        sink = sink_at(w, f"http://localhost:{port}", allowed_hosts=(entry,))
        report = scan_with(w, sink)
        assert report.ok, report.dead
        assert len(w.github.issues) == 1


@pytest.mark.parametrize(
    "resolved",
    [("10.20.30.40",), ("169.254.169.254",), ("140.82.112.6", "10.0.0.1")],
    ids=["private", "metadata", "one-answer-inside"],
)
def test_a_public_looking_name_that_dns_points_inside_is_refused_before_connecting(
    resolved: tuple[str, ...],
) -> None:
    with client((), *resolved) as http, pytest.raises(RefusedAddress) as caught:
        http.get("https://api.github.com/user")
    assert f"api.github.com resolves to {resolved[-1]}" in str(caught.value)


def test_the_connection_goes_to_the_address_that_was_checked() -> None:
    # The name resolves (once) to the fake's loopback address, admitted by its network: the
    # request arrives there although "ghe.corp" exists in no DNS.
    fake = FakeGitHub()
    with fake.running():
        port = int(fake.url.rsplit(":", 1)[1])
        transport = DeadlineTransport(
            5.0,
            base_url="http://ghe.corp",
            policy=AddressPolicy.of(["127.0.0.0/8"]),
            resolve=answers("127.0.0.1"),
        )
        with httpx.Client(transport=transport) as http:
            answer = http.get(f"http://ghe.corp:{port}/user")
    assert answer.status_code == 401  # the fake's answer to a request without a token
    assert [r.headers["host"] for r in fake.requests] == [f"ghe.corp:{port}"]


def test_github_enterprise_on_an_internal_address_and_port_is_admitted_when_allowlisted() -> None:
    env = {
        "MLCOPILOT_GITHUB_REPO": "acme/ml-alerts",
        "GITHUB_TOKEN": "ghp_" + "x" * 36,
        "MLCOPILOT_GITHUB_API_URL": "https://10.20.30.40:8443/api/v3",
    }
    settings = NotifySettings.from_env({**env, "MLCOPILOT_ALLOWED_HOSTS": "10.20.30.40:8443"})
    assert settings.github is not None
    assert settings.github.api_url == "https://10.20.30.40:8443/api/v3"
    # The connect-time policy the sink builds from the same entries admits the address...
    policy = AddressPolicy.of(settings.github.allowed_hosts)
    assert policy.admits("10.20.30.40", ipaddress.ip_address("10.20.30.40"))
    # ... and only it: another internal address is still refused.
    assert not policy.admits("10.20.30.41", ipaddress.ip_address("10.20.30.41"))
    GitHubSink(settings.github, clock=FakeClock())  # builds without connecting


def test_the_test_only_local_switch_admits_the_local_fakes_and_nothing_else(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w:
        assert w.env["MLCOPILOT_ALLOW_LOCAL_SINKS"] == "1"
        refused = scan_with(w, sink_at(w, w.github.url))  # the switch off
        ((_row, error),) = refused.dead
        assert "127.0.0.1 resolves to 127.0.0.1, an internal address" in error
        assert w.github.requests == []
    with world(tmp_path / "on") as w:
        delivered = scan_with(w, sink_at(w, w.github.url, allow_local=True))
        assert delivered.ok
        assert len(w.github.issues) == 1
        # The switch admits loopback only, not the private networks.
        local = AddressPolicy(allow_loopback=True)
        assert local.admits("x", ipaddress.ip_address("127.0.0.1"))
        assert not local.admits("x", ipaddress.ip_address("10.0.0.1"))


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", ISSUES), ("POST", ISSUES)],
    ids=["read", "create"],
)
def test_redirects_are_not_followed_even_to_an_allowlisted_host(
    tmp_path: Path, method: str, path: str
) -> None:
    target = FakeServer()
    with world(tmp_path) as w, target.running():
        w.github.fail(method, path, 302, {}, {"Location": f"{target.url}/steal"}, times=5)
        report = scan_with(w, sink_at(w, w.github.url, allow_local=True))
        assert target.requests == []
        ((row, error),) = report.dead
        assert "HTTP 302" in error
        assert "redirects are not followed" in error
        with w.store() as store:
            (stored,) = [i for i in store.outbox() if i.id == row.id]
        assert stored.status is OutboxStatus.DEAD


def test_through_a_proxy_the_operators_proxy_is_connected_to_and_resolves_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake GitHub stands as the forward proxy (it routes by the request's path). The API's
    # name exists in no DNS: it is never resolved here, and the proxy, on loopback, is not on
    # the allowlist (nor is the local switch on): the operator configured it.
    with world(tmp_path) as w:
        for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", w.github.url)
        report = scan_with(w, sink_at(w, "http://api.github.invalid"))
        assert report.ok, report.dead
        assert len(w.github.issues) == 1
        assert {r.headers["host"] for r in w.github.requests} == {"api.github.invalid"}
