"""Routing: each incident goes to the rule's targets, else its model's owners in DataHub, else
the defaults; through real scans, the real sinks and the GitHub and Slack fakes.

Two teams own two models in the catalog (``ownership``, ``corpGroupEditableInfo.slack``,
``corpUserEditableInfo.slack`` as DataHub writes them); each team's incidents reach its own
channel, mentioning its people.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.errors import ConfigError
from mlcopilot.model import Severity
from mlcopilot.notify.routing import Router, Subject, matches, platform_of
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.settings import load_settings
from testing.builders import owned_by
from testing.fakes.slack import FakeSlack
from testing.routing_world import (
    CHURN,
    CUSTOMERS,
    FRAUD,
    GROWTH,
    PAYMENTS,
    teams_world,
)


def roots_in(slack: FakeSlack, channel: str) -> list[dict[str, Any]]:
    return [m for m in slack.roots() if m["channel"] == channel]


def text_of(message: dict[str, Any]) -> str:
    return "\n".join(b["text"]["text"] for b in message["blocks"] if b.get("type") == "section")


def test_each_team_hears_of_its_own_model_in_its_own_channel(tmp_path: Path) -> None:
    with teams_world(tmp_path) as w:
        result = w.scan()
        assert result.relay is not None
        assert result.relay.ok, result.relay
        payments_id = w.slack._by_id_or_name(PAYMENTS)
        assert payments_id is not None
        (growth,) = roots_in(w.slack, GROWTH)
        (payments,) = roots_in(w.slack, payments_id.id)
        assert roots_in(w.slack, "C0MLCOPILOT") == []  # the default channel: nobody routed there
        assert "churn" in text_of(growth)
        assert "fraud" not in text_of(growth)
        assert "fraud" in text_of(payments)
        assert "churn" not in text_of(payments)
        # A member id is a live mention; anything else is a name, never markup.
        assert "*Owners:* <@U0ALICE>" in text_of(growth)
        assert "*Owners:* Bob Jones" in text_of(payments)
        assert "<@bob" not in text_of(payments)


def test_a_scan_reports_where_each_incident_went_unless_told_not_to(tmp_path: Path) -> None:
    """A watcher's scans leave the read (it renders no report); a scan's report has it."""
    with teams_world(tmp_path) as w:
        told = w.scan(report_targets=False)
        assert told.changes.opened
        assert told.targets == {}
        again = w.scan()
        assert set(again.targets) == {(i.id, i.generation) for i in told.changes.opened}
        assert all("github" in sinks for sinks in again.targets.values())


def test_the_thread_stays_in_the_channel_it_started_in(tmp_path: Path) -> None:
    with teams_world(tmp_path) as w:
        w.scan()
        # The growth team hands churn over to payments in DataHub; the group is already open.
        with LiteCatalog(w.catalog_path) as catalog:
            catalog.ingest(owned_by(CHURN, ["urn:li:corpGroup:payments-ml"]))
        w.script["pii_exposure"][CUSTOMERS] = [("a", Severity.CRITICAL, None)]
        w.clock.advance(timedelta(minutes=10))
        w.scan()
        (growth,) = roots_in(w.slack, GROWTH)
        assert [r["channel"] for r in w.slack.replies(growth["ts"])] == [GROWTH]
        # and payments now hears of it too, from the update on (a target joins an open group)
        payments = w.slack._by_id_or_name(PAYMENTS)
        assert payments is not None
        assert {text_of(m).count("churn") > 0 for m in roots_in(w.slack, payments.id)} == {
            True,
            False,
        }


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_rule_wins_over_the_owners_and_sets_repository_and_labels(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        '[[notify.routes]]\nmodels = ["fraud"]\nslack_channel = "#ml-alerts"\n'
        'github_repo = "acme/payments-ml"\ngithub_labels = ["payments", "pii"]\n',
    )
    with teams_world(tmp_path, MLCOPILOT_CONFIG=config) as w:
        w.scan()
        (fraud_issue,) = w.github.in_repo("acme/payments-ml")
        assert {label["name"] for label in fraud_issue["labels"]} >= {"payments", "pii"}
        (churn_issue,) = w.github.in_repo("acme/ml-alerts")
        assert "churn" in churn_issue["title"] or "customers" in churn_issue["title"]
        (default,) = roots_in(w.slack, "C0MLCOPILOT")
        assert "fraud" in text_of(default)
        assert len(roots_in(w.slack, GROWTH)) == 1  # churn: no rule matched, its owners


def test_the_issue_in_a_routed_repository_acknowledges_the_group(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, '[[notify.routes]]\nmodels = ["fraud"]\ngithub_repo = "acme/payments-ml"\n'
    )
    with teams_world(tmp_path, MLCOPILOT_CONFIG=config) as w:
        w.scan()
        (issue,) = w.github.in_repo("acme/payments-ml")
        w.github.assign(issue["number"], "carol")
        w.clock.advance(timedelta(minutes=10))
        result = w.scan()
        with w.store() as store:
            fraud = [i for i in store.incidents() if i.model == FRAUD]
        assert [i.acknowledged_by for i in fraud] == ["github:@carol"], result.acks


# --- the router alone


def settings(**env: str) -> NotifySettings:
    base = {
        "SLACK_BOT_TOKEN": "xoxb-" + "1" * 12 + "-" + "2" * 13 + "-" + "A" * 24,
        "MLCOPILOT_SLACK_CHANNEL": "#ml-alerts",
    }
    return NotifySettings.from_settings(load_settings(environ={**base, **env}))


def subject(**overrides: Any) -> Subject:
    fields: dict[str, Any] = {
        "check": "pii_exposure",
        "severity": Severity.HIGH,
        "model": CHURN,
        "model_name": "churn",
        "platform": "mlflow",
        "domains": ("urn:li:domain:payments",),
        "model_owners": (),
    }
    return Subject(**(fields | overrides))


def test_platform_of_a_model_urn() -> None:
    assert platform_of(CHURN) == "mlflow"
    assert platform_of("urn:li:mlModel:(urn:li:dataPlatform:sagemaker,a,PROD)") == "sagemaker"
    assert platform_of("urn:li:mlModel:odd") is None


@pytest.mark.parametrize(
    ("rule", "matched"),
    [
        ({}, True),
        ({"domains": ["payments"]}, True),
        ({"domains": ["urn:li:domain:payments"]}, True),
        ({"domains": ["growth"]}, False),
        ({"platforms": ["MLflow"]}, True),
        ({"platforms": ["sagemaker"]}, False),
        ({"models": ["ch*"]}, True),
        ({"models": ["fraud*"]}, False),
        ({"checks": ["schema_drift"]}, False),
        ({"min_severity": "critical"}, False),
        ({"min_severity": "high", "checks": ["pii_exposure"]}, True),
    ],
)
def test_a_rule_matches_when_every_condition_it_sets_does(
    rule: dict[str, Any], matched: bool
) -> None:
    from mlcopilot.settings import RouteRule

    assert matches(RouteRule(**rule), subject()) is matched


def test_without_owners_or_rules_the_default_is_used_and_said() -> None:
    (route,) = Router(settings(), {}).routes(subject(model_owners=None))
    assert (route.target, route.why) == ("slack", "the default")


def test_an_incoming_webhook_keeps_its_channel_whatever_the_owners() -> None:
    webhook = settings(
        SLACK_BOT_TOKEN="", SLACK_WEBHOOK_URL="https://hooks.slack.com/services/T/B/x"
    )
    from mlcopilot.model import Contact

    group = Contact("urn:li:corpGroup:g", "group", "g", slack="#team")
    (route,) = Router(webhook, {group.urn: group}).routes(subject(model_owners=(group.urn,)))
    assert route.target == "slack"
    assert "webhook" in route.why


def test_the_affected_entitys_owners_are_told_when_asked() -> None:
    from mlcopilot.model import Contact

    table_team = Contact("urn:li:corpGroup:warehouse", "group", "warehouse", slack="C0WAREHOUSE")
    about = subject(entity=CUSTOMERS, entity_owners=(table_team.urn,))
    contacts = {table_team.urn: table_team}
    assert [r.target for r in Router(settings(), contacts).routes(about)] == ["slack"]
    both = replace(settings(), owners=("model", "entity"))
    assert [r.target for r in Router(both, contacts).routes(about)] == ["slack:C0WAREHOUSE"]


def test_a_rule_naming_a_sink_that_is_not_configured_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[[notify.routes]]\npagerduty = true\n")
    with pytest.raises(ConfigError, match=r"notify.routes\[0\].pagerduty = true, but pagerduty"):
        NotifySettings.from_settings(load_settings(Path(config), environ={}))


# --- the command that explains it


def test_notify_routes_explains_each_target_and_the_owners(tmp_path: Path) -> None:
    from testing.installed_cli import run_cli

    with teams_world(tmp_path) as w:
        env = {**w.env, "MLCOPILOT_CATALOG": f"lite:{w.catalog_path}"}
        shown = run_cli(tmp_path, "notify", "routes", "--model", "churn", env=env, columns=200)
        assert shown.returncode == 0, shown.stderr
        assert f"→ slack:{GROWTH}: owner growth-ml in DataHub; mentions Alice Liddell" in (
            shown.stdout
        )
        assert "→ github: the default" in shown.stdout
        assert "urn:li:corpuser:alice (user Alice Liddell): U0ALICE" in shown.stdout
        as_json = run_cli(
            tmp_path, "notify", "routes", "--model", FRAUD, "--format", "json", env=env
        )
        explained = json.loads(as_json.stdout)
        assert [r["target"] for r in explained["routes"]] == ["github", f"slack:#{PAYMENTS}"]
        assert explained["routes"][1]["mentions"] == [{"name": "Bob Jones", "member_id": None}]


def test_incidents_list_says_where_each_incident_is_told(tmp_path: Path) -> None:
    from testing.installed_cli import run_cli

    with teams_world(tmp_path) as w:
        w.scan()
        env = {"MLCOPILOT_STATE_URL": w.state_url}
        listed = run_cli(tmp_path, "incidents", "list", "--format", "json", env=env)
        told = {i["model"]: i["targets"] for i in json.loads(listed.stdout)}
        assert told == {
            CHURN: ["github", f"slack:{GROWTH}"],
            FRAUD: ["github", f"slack:#{PAYMENTS}"],
        }
