"""Adaptive Cards for Microsoft Teams: one card per notification of a group.

Teams has no threads for a Workflows webhook: every card stands on its own, so each one
carries the headline, the summary and the DataHub button, whatever its action.

What a card holds (the content of :mod:`~mlcopilot.notify.sinks.render_slack`'s messages):

- ``open``: the headline, severity, counts and when it opened (a FactSet), why it matters and
  what to do (the check's info), the affected fields and models (a FactSet, one fact each);
- ``update``: what was added, changed and cleared since the previous card;
- ``reminder``: still open, not acknowledged, since when, and the open findings;
- ``acknowledge``: who acknowledged it;
- ``resolve``: resolved, and the findings that cleared;

and, on every card, ``Action.OpenUrl`` buttons to the entity's and the models' DataHub pages
(:func:`~mlcopilot.notify.content.entity_url`) and to the scan's HTML report(s). No mention
(``<at>``) is ever made: a card sends no ``msteams.entities``, so no text can ping anyone.

Catalog text is untrusted. Teams renders a markdown subset in ``TextBlock.text``,
``Fact.title`` and ``Fact.value`` (bold, italic, lists, links; no HTML), so every catalog value
is cleaned (:func:`~mlcopilot.text.safe.clean`: control, bidi and zero-width characters
removed, one line, cut to a size) and every character that could start markdown is
backslash-escaped (CommonMark's escapes, which Teams' desktop and web clients honour; some
mobile versions have shown the backslash instead, microsoft/AdaptiveCards#5590). The escapes
are chosen so such a client still forms no link: a ``(`` after a ``]`` is escaped too, so no
``](`` survives. Button titles are plain text (Teams does not render markdown there): cleaned
only.

Size: Teams refuses a message over about 28 KB. Every text is cut to a size, at most
:data:`MAX_FACTS` findings are listed ("… and N more" says how many are not), and a card
still over :data:`CARD_BUDGET` bytes is rendered again with fewer findings until it fits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from mlcopilot.incidents.payload import GroupSnapshot, Member, Notification
from mlcopilot.model import Severity
from mlcopilot.notify.content import change_word, entity_url, headline, info
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import clean
from mlcopilot.text.wording import count

CARD_TYPE: Final = "application/vnd.microsoft.card.adaptive"
SCHEMA: Final = "http://adaptivecards.io/schemas/adaptive-card.json"
VERSION: Final = "1.4"
"""Adaptive Cards 1.4: what Teams renders on desktop, web and mobile."""
MESSAGE_LIMIT: Final = 28 * 1024
"""Teams' limit on one message, its card included (about 28 KB)."""
CARD_BUDGET: Final = 24 * 1024
"""The most bytes a request body may take: under :data:`MESSAGE_LIMIT`, with room for what
the workflow wraps around the card when it posts it."""
MAX_FACTS: Final = 40
"""The most findings one card lists."""
MAX_ACTIONS: Final = 6
"""The most buttons: Teams shows six in a row (more go to an overflow menu)."""
_FACT_CAPS: Final = (MAX_FACTS, 20, 10, 5, 0)
_NAME = 120  # a field or entity name
_MODEL = 80
_WHY = 600
_ACTION = 1000
_BUTTON = 40
_REPORT_LINKS = 20

Card = dict[str, Any]
Element = dict[str, Any]

# Every character that opens markdown in Teams' subset or CommonMark around it: emphasis,
# links and images, autolinks and HTML, code, strikethrough, entities; and a ``(`` right after
# a ``]``, so no ``](`` is left even for a client that shows escapes instead of honouring them.
# An ``_`` between two letters or digits opens nothing (``customer_id``) and stays as it is.
_MD_SPECIAL = re.compile(r"[\\`*\[\]<>~&]|(?<=\])\(|(?<![^\W_])_|_(?![^\W_])")
# A list item, heading or quote at the start of a text.
_MD_LEADING = re.compile(r"^(?:[-+#]|\d+(?=[.)]))")


def envelope(card: Card) -> dict[str, Any]:
    """The message a Workflows webhook takes: ``card`` as its one attachment."""
    return {
        "type": "message",
        "attachments": [{"contentType": CARD_TYPE, "contentUrl": None, "content": card}],
    }


def encode(message: dict[str, Any]) -> bytes:
    """The request body for ``message``: compact UTF-8 JSON (what the size limit counts)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def message(notification: Notification, *, datahub_url: str | None) -> bytes:
    """The request body for ``notification``: its card, listing as many findings as fit.

    The body is at most :data:`CARD_BUDGET` bytes unless the card is too big even without
    a single finding listed (it cannot be, with every text cut as it is).
    """
    body = b""
    for facts in _FACT_CAPS:
        body = encode(envelope(card(notification, datahub_url=datahub_url, max_facts=facts)))
        if len(body) <= CARD_BUDGET:
            break
    return body


def card(
    notification: Notification, *, datahub_url: str | None, max_facts: int = MAX_FACTS
) -> Card:
    """The Adaptive Card for one notification of a group."""
    group = notification.group
    action = notification.action
    by_id = {m.incident_id: m for m in group.members}
    body: list[Element] = [_title(notification), _summary(notification)]
    if action == "open":
        body.append(_labelled("Why it matters", _md(info(group).why, _WHY)))
        body += _findings(group, [("Affected", group.members)], max_facts)
        body.append(_labelled("Suggested action", _md(info(group).action, _ACTION)))
    elif action == "update":
        sections = [
            (title, [by_id[i] for i in ids if i in by_id])
            for title, ids in (
                ("New", notification.added),
                ("Changed", notification.changed),
                ("Cleared", notification.cleared),
            )
        ]
        body += _findings(group, sections, max_facts)
    elif action == "reminder":
        body.append(_text("Still open and not acknowledged.", weight="Bolder"))
        body += _findings(group, [("Open", group.open_members)], max_facts)
        body.append(_labelled("Suggested action", _md(info(group).action, _ACTION)))
    elif action == "acknowledge":
        who = group.acknowledged_by
        said = f"Acknowledged by {_md(_person(who), _MODEL)}." if who else "Acknowledged."
        body.append(_text(said + " No more reminders are sent for it.", weight="Bolder"))
    elif action == "resolve":
        body.append(_text("Every finding cleared on the latest scan.", weight="Bolder"))
        body += _findings(group, [("Cleared", group.members)], max_facts)
    links, buttons = _reports(notification)
    body += links
    body.append(_context(group))
    return {
        "$schema": SCHEMA,
        "type": "AdaptiveCard",
        "version": VERSION,
        "fallbackText": clean(headline(notification), 300),
        "msteams": {"width": "Full"},
        "body": body,
        "actions": _buttons(group, datahub_url, buttons),
    }


# --- parts


_PREFIX = {
    "open": "",
    "update": "Update: ",
    "reminder": "Reminder: ",
    "acknowledge": "Acknowledged: ",
    "resolve": "Resolved: ",
}
_COLOURS = {
    Severity.CRITICAL: "Attention",
    Severity.HIGH: "Attention",
    Severity.MEDIUM: "Warning",
    Severity.LOW: "Accent",
}


def _title(notification: Notification) -> Element:
    group = notification.group
    kind = _md(info(group).title, _NAME)
    where = _md(short_name(group.entity), _NAME)
    colour = "Good" if notification.action == "resolve" else _COLOURS[group.worst]
    text = f"{_PREFIX.get(notification.action, '')}{kind} at {where}"
    return _text(text, size="Large", weight="Bolder", color=colour)


def _summary(notification: Notification) -> Element:
    group = notification.group
    facts = [
        ("Severity", group.worst.value),
        ("Models", str(len(group.models))),
        ("Open findings", f"{len(group.open_members)} of {len(group.members)}"),
        ("Open since", _when(group.opened_at)),
    ]
    if notification.action == "resolve" and group.resolved_at is not None:
        facts.append(("Resolved", _when(group.resolved_at)))
    return _facts(facts)


def _findings(
    group: GroupSnapshot, sections: Sequence[tuple[str, Sequence[Member]]], max_facts: int
) -> list[Element]:
    """A heading and a FactSet per non-empty section, at most ``max_facts`` facts in all."""
    elements: list[Element] = []
    left = max_facts
    for title, members in sections:
        if not members:
            continue
        elements.append(_text(f"{title} ({len(members)})", weight="Bolder", spacing="Medium"))
        shown = members[: max(0, left)]
        left -= len(shown)
        if shown:
            elements.append(_facts([_finding(group, m) for m in shown]))
        if len(shown) < len(members):
            elements.append(_text(f"… and {len(members) - len(shown)} more", isSubtle=True))
    return elements


def _finding(group: GroupSnapshot, member: Member) -> tuple[str, str]:
    where = _md(member.field, _NAME) if member.field else _md(short_name(member.entity), _NAME)
    if member.change == "renamed" and member.previous_field:
        change = f"renamed from {_md(member.previous_field, _NAME)}"
    else:
        change = _md(change_word(group, member), _MODEL)
    state = " · cleared" if not member.open else ""
    model = _md(short_name(member.model), _MODEL)
    return where, f"{change} in {model} ({member.severity.value}){state}"


def _reports(notification: Notification) -> tuple[list[Element], list[tuple[str, str]]]:
    """The scan's HTML report(s): buttons when few, else a text of links (and buttons none)."""
    urls = notification.report_urls
    if not urls:
        return [], []
    distinct = set(urls.values())
    if len(distinct) == 1:
        return [], [("HTML report", next(iter(distinct)))]
    ordered = sorted(urls.items())
    if len(ordered) <= MAX_ACTIONS - 2:
        return [], [(f"Report: {_button(short_name(m), 30)}", url) for m, url in ordered]
    # Stored checked and quoted (payload.report_links): no space, bracket or parenthesis, so
    # a URL cannot end the markdown link early.
    links = [f"[{_md(short_name(m), _MODEL)}]({url})" for m, url in ordered[:_REPORT_LINKS]]
    more = len(ordered) - _REPORT_LINKS
    text = "HTML reports: " + " · ".join(links) + (f" and {more} more" if more > 0 else "")
    return [_text(text)], []


def _buttons(
    group: GroupSnapshot, datahub_url: str | None, reports: list[tuple[str, str]]
) -> list[Element]:
    buttons: list[tuple[str, str]] = []
    url = entity_url(datahub_url, group.entity, "Incidents")
    if url is not None:
        buttons.append((f"Open {_button(short_name(group.entity), _BUTTON)} in DataHub", url))
    buttons += reports
    for model in group.models:
        if len(buttons) >= MAX_ACTIONS:
            break
        url = entity_url(datahub_url, model)
        if url is not None:
            buttons.append((f"Model {_button(short_name(model), _BUTTON)}", url))
    return [
        {"type": "Action.OpenUrl", "title": title, "url": url}
        for title, url in buttons[:MAX_ACTIONS]
    ]


def _context(group: GroupSnapshot) -> Element:
    return _text(
        f"mlcopilot · group {group.key} (generation {group.generation}) · "
        f"{count(len(group.models), 'model')}",
        size="Small",
        isSubtle=True,
    )


# --- elements and text


def _text(text: str, **style: Any) -> Element:
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def _labelled(label: str, text: str) -> Element:
    return _text(f"**{label}:** {text}")


def _facts(facts: Sequence[tuple[str, str]]) -> Element:
    return {"type": "FactSet", "facts": [{"title": t, "value": v} for t, v in facts]}


def _md(text: str, limit: int) -> str:
    """``text`` for a TextBlock or a fact: cleaned, cut, every markdown character escaped.

    Renders as the cleaned text, nothing more: no emphasis, link, image, code or list can come
    out of it. A ``(`` after a ``]`` is escaped too, so even a client that shows backslashes
    instead of honouring them sees no ``](`` to make a link of.
    """
    value = clean(text, limit)
    value = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), value)
    leading = _MD_LEADING.match(value)
    if leading is None:
        return value
    marker = leading.group()
    if marker[0].isdigit():  # "1. x" is a list: escape its dot or parenthesis
        end = len(marker)
        return value[:end] + "\\" + value[end:]
    return "\\" + value


def _button(text: str, limit: int) -> str:
    """A button title: plain text (Teams does not render markdown there), cleaned and cut."""
    return clean(text, limit) or "(unnamed)"


def _person(who: str) -> str:
    return short_name(who) if who.startswith("urn:li:") else who


def _when(at: datetime) -> str:
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    return at.strftime("%Y-%m-%d %H:%M UTC")
