"""Who is told about an incident: the configured rules, the owners DataHub records, the defaults.

Per sink, the first of these that gives a target wins:

1. the first ``[[notify.routes]]`` rule the incident matches (its domains, platforms, model
   name globs, checks and least severity), for the sinks the rule names;
2. for Slack, the owners in DataHub: each owning group's channel
   (``corpGroupEditableInfo.slack``) — the model's owners, and with ``notify.owners =
   ["model", "entity"]`` the affected entity's too;
3. the defaults (``MLCOPILOT_SLACK_CHANNEL``, ``MLCOPILOT_GITHUB_REPO``, PagerDuty's routing
   key, ...).

Slack messages mention the owning people: live (``<@U…>``) when ``corpUserEditableInfo.slack``
is a member id, by name otherwise. PagerDuty pages only incidents at least as severe as
``pagerduty.min_severity``, whoever routed them there. Pure: the catalog's facts come in as
:class:`Subject` and :class:`~mlcopilot.model.Contact`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from mlcopilot.model import Contact, Mention, Route, Severity, SinkName, Urn, target_of
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.settings import RouteRule
from mlcopilot.text.names import short_name

DEFAULT = "the default"
_SWITCHED = ("pagerduty", "teams", "webhook")
"""Sinks a rule turns on or off (``pagerduty = true``); they have no destinations."""


@dataclass(frozen=True, slots=True)
class Subject:
    """What routing reads of one incident: its check, severity, model and affected entity."""

    check: str
    severity: Severity
    model: Urn
    model_name: str
    platform: str | None
    domains: tuple[Urn, ...]
    model_owners: tuple[Urn, ...] | None
    """None: the catalog has no ``ownership`` for the model (said by :func:`explain`)."""
    entity: Urn | None = None
    entity_owners: tuple[Urn, ...] | None = None


def platform_of(model: Urn) -> str | None:
    """``sagemaker`` for ``urn:li:mlModel:(urn:li:dataPlatform:sagemaker,churn,PROD)``."""
    marker = "urn:li:dataPlatform:"
    start = model.find(marker)
    if start < 0:
        return None
    rest = model[start + len(marker) :]
    return rest.split(",", 1)[0].rstrip(")") or None


def matches(rule: RouteRule, subject: Subject) -> bool:
    """Whether ``subject`` meets every condition ``rule`` sets (an empty one matches all)."""
    if rule.domains and not any(
        _domain_matches(wanted, have) for wanted in rule.domains for have in subject.domains
    ):
        return False
    if rule.platforms and (subject.platform or "").lower() not in {
        p.lower().removeprefix("urn:li:dataplatform:") for p in rule.platforms
    }:
        return False
    if rule.models and not any(
        fnmatchcase(subject.model_name, glob) or fnmatchcase(subject.model, glob)
        for glob in rule.models
    ):
        return False
    if rule.checks and subject.check not in rule.checks:
        return False
    return rule.min_severity is None or subject.severity.at_least(Severity(rule.min_severity))


def _domain_matches(wanted: str, domain: Urn) -> bool:
    # A name is the urn's id (urn:li:domain:payments); the domain's display name is not read.
    if wanted.startswith("urn:li:domain:"):
        return wanted == domain
    return wanted.lower() == domain.removeprefix("urn:li:domain:").lower()


@dataclass(frozen=True, slots=True)
class Router:
    """Routes incidents with the settings' rules, defaults and the owners' contacts."""

    notify: NotifySettings
    contacts: Mapping[Urn, Contact]
    sinks: tuple[str, ...] | None = None
    """The sinks routed to (default: the settings'); one routing does not know (a plugin's)
    gets its default target."""

    def rule_for(self, subject: Subject) -> tuple[int, RouteRule] | None:
        """The first rule ``subject`` matches, with its index."""
        for index, rule in enumerate(self.notify.routes):
            if matches(rule, subject):
                return index, rule
        return None

    def routes(self, subject: Subject) -> tuple[Route, ...]:
        """Where ``subject`` is told, one route per target, in the sinks' order."""
        chosen = self.rule_for(subject)
        found: list[Route] = []
        for sink in self.notify.sinks if self.sinks is None else self.sinks:
            found += self._sink_routes(sink, subject, chosen)
        return tuple(found)

    def owners(self, subject: Subject) -> tuple[Urn, ...]:
        """The owners told: the model's, then (``notify.owners``) the affected entity's."""
        owners: list[Urn] = []
        if "model" in self.notify.owners:
            owners += subject.model_owners or ()
        if "entity" in self.notify.owners:
            owners += subject.entity_owners or ()
        return tuple(dict.fromkeys(owners))

    def _sink_routes(
        self, sink: str, subject: Subject, chosen: tuple[int, RouteRule] | None
    ) -> list[Route]:
        rule_why = f"rule {chosen[0] + 1} of notify.routes" if chosen else ""
        rule = chosen[1] if chosen else None
        if sink in _SWITCHED:
            on: bool | None = getattr(rule, sink) if rule is not None else None
            why = rule_why if on is not None else DEFAULT
            if on is False:
                return []
            pagerduty = self.notify.pagerduty
            if (
                sink == "pagerduty"
                and pagerduty is not None
                and not subject.severity.at_least(pagerduty.min_severity)
            ):
                return []
            return [Route(target_of(sink), why)]
        if sink == "github":
            labels = tuple(rule.github_labels) if rule else ()
            if rule is not None and rule.github_repo:
                return [Route(target_of(sink, rule.github_repo), rule_why, labels)]
            return [Route(target_of(sink), rule_why if labels else DEFAULT, labels)]
        if sink == "slack":
            return self._slack(subject, rule, rule_why)
        return [Route(target_of(sink), DEFAULT)]  # a plugin: its own configuration decides

    def _slack(self, subject: Subject, rule: RouteRule | None, rule_why: str) -> list[Route]:
        mentions = self._mentions(subject)
        slack = self.notify.slack
        if slack is not None and slack.mode == "webhook":
            return [
                Route("slack", f"{DEFAULT} (an incoming webhook has one channel)", (), mentions)
            ]
        if rule is not None and rule.slack_channel:
            return [Route(target_of("slack", rule.slack_channel), rule_why, (), mentions)]
        channels: dict[str, str] = {}
        for owner in self.owners(subject):
            contact = self.contacts.get(owner)
            if contact is not None and contact.kind == "group" and contact.slack:
                channels.setdefault(contact.slack, f"owner {short_name(owner)} in DataHub")
        if channels:
            return [
                Route(target_of("slack", channel), why, (), mentions)
                for channel, why in channels.items()
            ]
        return [Route("slack", DEFAULT, (), mentions)]

    def _mentions(self, subject: Subject) -> tuple[Mention, ...]:
        people: list[Mention] = []
        for owner in self.owners(subject):
            contact = self.contacts.get(owner)
            if contact is None:
                if owner.startswith("urn:li:corpuser:"):
                    people.append(Mention(owner.removeprefix("urn:li:corpuser:")))
                continue
            if contact.kind == "user":
                people.append(Mention(contact.name, contact.slack_member_id))
        return tuple(dict.fromkeys(people))


def owner_urns(subjects: Sequence[Subject], scopes: Sequence[str]) -> list[Urn]:
    """Every owner whose contact routing may need, sorted."""
    found: set[Urn] = set()
    for subject in subjects:
        if "model" in scopes:
            found.update(subject.model_owners or ())
        if "entity" in scopes:
            found.update(subject.entity_owners or ())
    return sorted(found)


def targets(routes: Sequence[Route]) -> tuple[SinkName, ...]:
    """The distinct targets of ``routes``, in order."""
    return tuple(dict.fromkeys(r.target for r in routes))
