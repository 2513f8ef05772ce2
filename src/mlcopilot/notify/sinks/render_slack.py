"""Slack Block Kit messages for a notification group: a root message, thread replies.

Limits kept (https://docs.slack.dev/reference/block-kit/blocks): at most 50 blocks, header
text 150 characters, section text 3 000, a plain fallback ``text`` always set. Catalog values
are cleaned, escaped and put in inline code (:mod:`mlcopilot.text.safe`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mlcopilot.incidents.payload import GroupSnapshot, Member, Mention, Notification
from mlcopilot.notify.content import change_word, entity_url, headline, info
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import slack_code, slack_plain, slack_text, truncate

HEADER_LIMIT = 150
SECTION_LIMIT = 3000
MAX_BLOCKS = 50
_MEMBER_SECTIONS = 30
_FALLBACK_LIMIT = 3000

Blocks = list[dict[str, Any]]


def root_message(
    notification: Notification,
    *,
    datahub_url: str | None,
    mentions: Sequence[Mention] = (),
) -> tuple[str, Blocks]:
    """The root message of a group's thread (``open``; or the edited root on resolution).

    ``mentions``: the owning people routing names; a member id is a live mention, a name is
    escaped text (never markup).
    """
    group = notification.group
    resolved = notification.action == "resolve"
    icon = ":white_check_mark:" if resolved else _icon(group)
    blocks: Blocks = [
        {"type": "header", "text": _plain(f"{'Resolved: ' if resolved else ''}{_title(group)}")},
        _section(f"{icon} {_summary(group)}"),
    ]
    if mentions and not resolved:
        blocks.append(_section(f"*Owners:* {owners_text(mentions)}"))
    if not resolved:
        blocks.append(_section(f"*Why it matters:* {info(group).why}"))
    blocks += _member_sections(group, group.members)
    if not resolved:
        blocks.append(_section(f"*Suggested action:* {slack_text(_action(group), 1500)}"))
    blocks += _report(notification)
    blocks += _links(group, datahub_url)
    blocks.append(_context(group))
    return _fallback(notification), _cap(blocks)


def thread_message(notification: Notification, *, datahub_url: str | None) -> tuple[str, Blocks]:
    """A reply in the group's thread: an update, a reminder or the resolution."""
    group = notification.group
    by_id = {m.incident_id: m for m in group.members}
    if notification.action == "resolve":
        blocks: Blocks = [
            _section(":white_check_mark: *Resolved.* Every finding cleared on the latest scan.")
        ]
    elif notification.action == "reminder":
        blocks = [
            _section(f":alarm_clock: *Still open, not acknowledged.* {_summary(group)}"),
        ]
    else:
        blocks = [_section(f":arrows_counterclockwise: *Update.* {_summary(group)}")]
        for title, ids in (
            ("New", notification.added),
            ("Changed", notification.changed),
            ("Cleared", notification.cleared),
        ):
            members = [by_id[i] for i in ids if i in by_id]
            if members:
                blocks += _member_sections(group, members, title=title)
    blocks += _report(notification)
    blocks.append(_context(group))
    return _fallback(notification), _cap(blocks)


_MEMBER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_SHOWN_OWNERS = 20


def owners_text(mentions: Sequence[Mention]) -> str:
    """``<@U0ALICE>, Bob Jones`` — live mentions for member ids, escaped names otherwise."""
    shown = [
        f"<@{m.member_id}>"
        if m.member_id and _MEMBER_ID.fullmatch(m.member_id)
        else slack_text(m.name, 80)
        for m in mentions[:_SHOWN_OWNERS]
    ]
    more = len(mentions) - _SHOWN_OWNERS
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _title(group: GroupSnapshot) -> str:
    kind = info(group).title
    return truncate(f"{kind} at {slack_plain(short_name(group.entity), 100)}", HEADER_LIMIT)


def _summary(group: GroupSnapshot) -> str:
    return (
        f"*Severity:* {group.worst.value} · *Models:* {len(group.models)} · "
        f"*Open findings:* {len(group.open_members)} of {len(group.members)}"
    )


def _member_sections(
    group: GroupSnapshot, members: Sequence[Member], *, title: str = "Affected"
) -> Blocks:
    sections: Blocks = []
    current = f"*{title}:*"
    shown = 0
    for member in members:
        line = _member_line(group, member)
        if len(current) + len(line) + 1 > SECTION_LIMIT:
            sections.append(_section(current))
            current = ""
            if len(sections) >= _MEMBER_SECTIONS:
                break
        current = f"{current}\n{line}" if current else line
        shown += 1
    if current:
        sections.append(_section(current))
    if shown < len(members):
        sections.append(_section(f"… and {len(members) - shown} more"))
    return sections


def _member_line(group: GroupSnapshot, m: Member) -> str:
    where = slack_code(m.field, 120) if m.field else slack_code(short_name(m.entity), 120)
    change = change_word(group, m)
    if m.change == "renamed" and m.previous_field:
        change = f"renamed from {slack_code(m.previous_field, 120)}"
    state = "" if m.open else " — cleared"
    return (
        f"• {where} in {slack_code(short_name(m.model), 80)}: {change} ({m.severity.value}){state}"
    )


def _report(notification: Notification) -> Blocks:
    """A link to the scan's HTML report (one per model when each has its own), if any."""
    urls = notification.report_urls
    if not urls:
        return []
    # Stored checked and quoted (codec.report_links): no <, > or | to break out of <url|text>.
    if len(set(urls.values())) == 1:
        (url,) = set(urls.values())
        return [_section(f":bar_chart: <{url}|Open the HTML report> (lineage, findings, timeline)")]
    links = [
        f"<{url}|HTML report: {slack_text(short_name(model), 80)}>"
        for model, url in sorted(urls.items())[:20]
    ]
    return [_section(":bar_chart: " + " · ".join(links))]


def _links(group: GroupSnapshot, datahub_url: str | None) -> Blocks:
    url = entity_url(datahub_url, group.entity, "Incidents")
    if url is None:
        return []
    return [_section(f"<{url}|Open {slack_text(short_name(group.entity), 80)} in DataHub>")]


def _context(group: GroupSnapshot) -> dict[str, Any]:
    text = f"mlcopilot · group {group.key} (generation {group.generation})"
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _fallback(notification: Notification) -> str:
    return slack_text(headline(notification), _FALLBACK_LIMIT)


def _action(group: GroupSnapshot) -> str:
    return info(group).action


_ICONS = {"critical": ":rotating_light:", "high": ":red_circle:", "medium": ":large_orange_circle:"}


def _icon(group: GroupSnapshot) -> str:
    return _ICONS.get(group.worst.value, ":large_blue_circle:")


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, HEADER_LIMIT), "emoji": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, SECTION_LIMIT)}}


def _cap(blocks: Blocks) -> Blocks:
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    return [*blocks[: MAX_BLOCKS - 2], _section("… cut to Slack's block limit"), blocks[-1]]
