"""Operators' own endpoints: ``notify.allowed_hosts`` admits GitHub Enterprise Server on an
internal address or port and GovSlack; the defaults stay strict; names are checked after
resolution, in the clients themselves (issue 11)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from mlcopilot.errors import ConfigError
from mlcopilot.incidents.payload import DeliveryError, OutboxItem
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.config import NotifySettings, SlackSettings
from mlcopilot.notify.sinks.http import RefusedAddress, connect
from mlcopilot.notify.sinks.slack import SlackSink, SlackWebhookSink
from mlcopilot.notify.sinks.urls import AddressPolicy
from mlcopilot.settings import host_rule
from testing.fakes.slack import TOKEN, WEBHOOK_PATH, FakeSlack
from testing.installed_cli import run_cli
from testing.notify_world import CUSTOMERS, World, world

GH_TOKEN = "ghp_" + "x" * 36


def github(url: str, hosts: str = "") -> NotifySettings:
    return NotifySettings.from_env(
        {
            "MLCOPILOT_GITHUB_REPO": "acme/ml-alerts",
            "GITHUB_TOKEN": GH_TOKEN,
            "MLCOPILOT_GITHUB_API_URL": url,
            "MLCOPILOT_ALLOWED_HOSTS": hosts,
        }
    )


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("https://10.20.30.40/api/v3", "10.20.30.40"),
        ("https://10.20.30.40/api/v3", "10.20.0.0/16"),
        ("https://10.20.30.40:8443/api/v3", "10.20.30.40:8443"),
        ("https://ghe.corp:8443/api/v3", "ghe.corp:8443"),
        ("https://ghe.corp/api/v3", "ghe.corp"),
        ("https://[fd00::5]:8443/api/v3", "[fd00::5]:8443"),
    ],
)
def test_an_allowlist_entry_admits_github_enterprise_on_an_internal_address_or_port(
    url: str, hosts: str
) -> None:
    settings = github(url, hosts)
    assert settings.github is not None
    assert settings.github.api_url == url
    with pytest.raises(ConfigError):
        github(url)  # the defaults refuse each of them


@pytest.mark.parametrize(
    ("url", "hosts", "said"),
    [
        ("https://ghe.corp:8443/api/v3", "ghe.corp", "ghe.corp:8443"),  # the port is not named
        ("https://10.20.30.40:8443/api/v3", "10.20.0.0/16", "10.20.30.40:8443"),  # nor here
        ("https://10.20.30.41/api/v3", "10.20.30.40", "internal address"),
        ("https://ghe.corp/other", "ghe.corp", "not an allowed address"),
        ("https://169.254.169.254/api/v3", "10.0.0.0/8", "internal address"),
        ("http://10.20.30.40/api/v3", "10.20.30.40", "https://"),
    ],
)
def test_an_entry_admits_only_what_it_names(url: str, hosts: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        github(url, hosts)
    assert said in str(caught.value)


def test_govslack_is_a_default_slack_host() -> None:
    bot = NotifySettings.from_env(
        {
            "SLACK_BOT_TOKEN": TOKEN,
            "MLCOPILOT_SLACK_CHANNEL": "#ml-alerts",
            "MLCOPILOT_SLACK_API_URL": "https://slack-gov.com/api/",
        }
    )
    assert bot.slack is not None
    assert bot.slack.api_url == "https://slack-gov.com/api/"
    hook = NotifySettings.from_env(
        {"SLACK_WEBHOOK_URL": "https://hooks.slack-gov.com/services/T0/B0/" + "W" * 24}
    )
    assert hook.slack is not None
    with pytest.raises(ConfigError):
        NotifySettings.from_env(
            {
                "SLACK_BOT_TOKEN": TOKEN,
                "MLCOPILOT_SLACK_CHANNEL": "#ml-alerts",
                "MLCOPILOT_SLACK_API_URL": "https://slack-gov.com.evil.example/api/",
            }
        )


def test_a_bad_entry_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        github("https://ghe.corp/api/v3", "ghe.corp, https://ghe.corp/api")
    message = str(caught.value)
    assert "MLCOPILOT_ALLOWED_HOSTS" in message
    assert "'https://ghe.corp/api'" in message
    for bad in ("*.corp", "ghe.corp:0", "ghe.corp:http", "10.0.0.0/33", "a b"):
        with pytest.raises(ValueError, match="host, host:port or CIDR"):
            host_rule(bad)


def test_config_show_shows_the_allowlist_and_where_it_came_from(tmp_path: Path) -> None:
    env = {"MLCOPILOT_ALLOWED_HOSTS": "10.20.30.40:8443,ghe.corp"}
    done = run_cli(tmp_path / "home", "config", "show", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    assert shown["notify.allowed_hosts"] == {
        "value": ["10.20.30.40:8443", "ghe.corp"],
        "source": "MLCOPILOT_ALLOWED_HOSTS",
    }


# --- after resolution --------------------------------------------------------------------------


def fixed(address: str) -> Any:
    """A resolver that answers every name with ``address`` (DNS pointed somewhere inside)."""

    def resolve(host: str, port: int, *args: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    return resolve


def test_a_default_name_resolving_inside_is_refused_before_connecting() -> None:
    with pytest.raises(RefusedAddress) as caught:
        connect(
            "slack.com", 443, timeout=1, policy=AddressPolicy(), resolve=fixed("169.254.169.254")
        )
    assert "169.254.169.254" in str(caught.value)
    assert "notify.allowed_hosts" in str(caught.value)


def test_a_name_resolving_inside_is_admitted_by_its_name_or_its_network() -> None:
    slack = FakeSlack()
    with slack.running():
        port = int(slack.url.rsplit(":", 1)[1])
        with pytest.raises(RefusedAddress):
            connect("localhost", port, timeout=1, policy=AddressPolicy())
        for entry in ("localhost", "127.0.0.0/8"):
            policy = AddressPolicy(rules=(host_rule(entry),))
            connect("localhost", port, timeout=1, policy=policy, resolve=fixed("127.0.0.1")).close()


def settings_at(url: str, **fields: Any) -> SlackSettings:
    return SlackSettings(
        channel="C0MLCOPILOT", bot_token=SecretStr(TOKEN), api_url=url, post_spacing_s=0, **fields
    )


def open_row(w: World) -> OutboxItem:
    w.script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
    w.scan(deliver=False)
    with w.store() as store:
        (row,) = [i for i in store.outbox() if i.sink == "slack"]
    return row


def test_the_slack_clients_check_the_address_a_name_resolves_to(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        row = open_row(w)
        port = w.slack.url.rsplit(":", 1)[1]
        by_name = f"http://localhost:{port}/api/"
        bot = SlackSink(settings_at(by_name), clock=w.clock)
        with pytest.raises(DeliveryError) as caught:
            bot.deliver(row, None)
        assert caught.value.permanent
        assert "localhost resolves to" in str(caught.value)
        hook = SlackWebhookSink(
            SlackSettings(webhook_url=SecretStr(f"http://localhost:{port}{WEBHOOK_PATH}")),
            clock=w.clock,
        )
        with pytest.raises(DeliveryError) as refused:
            hook.deliver(row, None)
        assert refused.value.permanent
        assert WEBHOOK_PATH not in str(refused.value)
        assert w.slack.requests == []  # nothing reached the server
        allowed = SlackSink(settings_at(by_name, allowed_hosts=("localhost",)), clock=w.clock)
        allowed.deliver(row, None)
        assert len(w.slack.roots()) == 1
