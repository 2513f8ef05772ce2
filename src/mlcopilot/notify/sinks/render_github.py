"""GitHub issue titles, bodies and comments for a notification group (GitHub-flavoured markdown).

The body says what changed, why it matters, draws the lineage path as a Mermaid diagram,
tabulates every affected model and field, links to DataHub and suggests what to do. Every
value from the catalog goes through :mod:`mlcopilot.text.safe`; sizes stay under GitHub's
limits (title 256, body and comment 65 536 characters).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from mlcopilot.incidents.payload import GroupSnapshot, Member, Notification
from mlcopilot.model import Urn
from mlcopilot.notify.content import change_word, entity_url, headline, info, marker
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import clean, md_block, md_code, mermaid_label, truncate
from mlcopilot.text.wording import count

TITLE_LIMIT = 256
BODY_LIMIT = 65_536
_SAFE_BODY = 64_000  # headroom under the limit for the closing note
_TABLE_ROWS = 150
_MESSAGES = 60
_DIAGRAM_NODES = 40


def issue_title(notification: Notification) -> str:
    """``[mlcopilot] Schema drift at `raw.customers` (2 models, 5 findings)``, ≤256 characters."""
    group = notification.group
    kind = info(group).title
    models = len(group.models)
    findings = len({(m.model, m.field) for m in group.members})
    scope = f"{count(models, 'model')}, {count(findings, 'finding')}"
    prefix, suffix = f"[mlcopilot] {kind} at ", f" ({scope})"
    room = TITLE_LIMIT - len(prefix) - len(suffix) - 4
    return truncate(prefix + md_code(short_name(group.entity), room) + suffix, TITLE_LIMIT)


def issue_body(notification: Notification, *, datahub_url: str | None) -> str:
    """The body of a new issue."""
    group = notification.group
    parts = [
        marker(group),
        f"## {info(group).title} at {md_code(short_name(group.entity), 120)}",
        "",
        _summary(group),
        "",
        *_report(notification),
        "### What changed",
        "",
        _messages(group.open_members or group.members),
        "",
        "### Why it matters",
        "",
        info(group).why,
        "",
        _diagram(group.members),
        "",
        "### Affected models and fields",
        "",
        _table(group, group.members),
        "",
        "### In DataHub",
        "",
        *_links(group, datahub_url),
        "",
        "### Suggested action",
        "",
        info(group).action,
        "",
        "<sub>Opened by mlcopilot. Updates arrive as comments and the issue closes itself when "
        "every finding clears. Assign someone or add the `acknowledged` label to stop "
        "reminders.</sub>",
    ]
    return _fit("\n".join(parts))


def comment_body(notification: Notification, *, datahub_url: str | None) -> str:
    """A comment for an update, a reminder or the resolution."""
    group = notification.group
    by_id = {m.incident_id: m for m in group.members}
    mark = marker(group, notification.action, notification.seq)
    if notification.action == "resolve":
        parts = [
            mark,
            f"### Resolved: {md_code(short_name(group.entity), 120)} is back to normal",
            "",
            "Every finding of this issue cleared on the latest scan. Closing as completed. "
            "If it comes back, mlcopilot opens a new issue.",
        ]
    elif notification.action == "reminder":
        parts = [
            mark,
            "### Reminder: still open and unacknowledged",
            "",
            _summary(group),
            "",
            "Assign someone or add the `acknowledged` label to stop reminders.",
        ]
    else:
        parts = [mark, "### Update", "", _summary(group), ""]
        parts += _delta(group, "New", notification.added, by_id)
        parts += _delta(group, "Changed", notification.changed, by_id)
        parts += _delta(group, "Cleared", notification.cleared, by_id)
        parts += ["### Affected models and fields now", "", _table(group, group.members)]
    parts += ["", *_report(notification), *_links(group, datahub_url)]
    return _fit("\n".join(parts))


def _summary(group: GroupSnapshot) -> str:
    still = len(group.open_members)
    return (
        f"**Severity:** {group.worst.value} · **Models:** {len(group.models)} · "
        f"**Open findings:** {still} of {len(group.members)} · "
        f"**Since:** {group.opened_at:%Y-%m-%d %H:%M} UTC · **Group:** `{group.key}` "
        f"(generation {group.generation})"
    )


def _messages(members: Sequence[Member]) -> str:
    lines = [
        f"[{m.severity.value}] {clean(short_name(m.model), 80)}: {clean(m.message, 400)}"
        for m in members[:_MESSAGES]
    ]
    if len(members) > _MESSAGES:
        lines.append(f"... and {len(members) - _MESSAGES} more (see the table below)")
    return md_block(lines)


def _table(group: GroupSnapshot, members: Sequence[Member]) -> str:
    rows = [
        "| Model | Entity | Field | Change | Severity | State | Incident |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in members[:_TABLE_ROWS]:
        field = md_code(m.field, 120, in_table=True) if m.field else "—"
        change = change_word(group, m)
        if m.change == "renamed" and m.previous_field:
            change = f"renamed from {md_code(m.previous_field, 120, in_table=True)}"
        rows.append(
            f"| {md_code(short_name(m.model), 80, in_table=True)} "
            f"| {md_code(short_name(m.entity), 80, in_table=True)} | {field} | {change} "
            f"| {m.severity.value} | {'open' if m.open else 'cleared'} | `{m.incident_id}` |"
        )
    if len(members) > _TABLE_ROWS:
        rows.append(f"| … {len(members) - _TABLE_ROWS} more | | | | | | |")
    return "\n".join(rows)


def _diagram(members: Sequence[Member]) -> str:
    """The lineage paths, upstream entity on the left, models on the right."""
    ids: dict[Urn, str] = {}
    edges: dict[tuple[str, str], None] = {}
    for m in members:
        path = list(reversed(m.path)) or [m.entity, m.model]
        for urn in path:
            if urn not in ids and len(ids) < _DIAGRAM_NODES:
                ids[urn] = f"n{len(ids)}"
        for upstream, downstream in itertools.pairwise(path):
            if upstream in ids and downstream in ids:
                edges[(ids[upstream], ids[downstream])] = None
    lines = ["graph LR"]
    lines += [f'  {node}["{mermaid_label(short_name(urn))}"]' for urn, node in ids.items()]
    lines += [f"  {a} --> {b}" for a, b in edges]
    return md_block(lines, language="mermaid")


def _report(notification: Notification) -> list[str]:
    """The link to the scan's HTML report (one per model when each has its own), if any."""
    urls = notification.report_urls
    if not urls:
        return []
    # Stored checked and quoted (codec.report_links): safe inside a markdown link as it is.
    if len(set(urls.values())) == 1:
        (url,) = set(urls.values())
        return [f"**Report:** [lineage, findings and timeline]({url})", ""]
    lines = [
        f"- {md_code(short_name(model), 80)}: [HTML report]({url})"
        for model, url in sorted(urls.items())[:20]
    ]
    return ["**Reports:**", "", *lines, ""]


def _links(group: GroupSnapshot, datahub_url: str | None) -> list[str]:
    urns = [group.entity, *group.models]
    lines = []
    for urn in urns[:20]:
        label = "Upstream" if urn == group.entity else "Model"
        url = entity_url(datahub_url, urn, "Incidents" if urn == group.entity else None)
        if url is not None:
            lines.append(f"- {label}: [{md_code(short_name(urn), 80)}]({url})")
        else:
            lines.append(f"- {label}: {md_code(urn, 300)}")
    return lines


def _delta(
    group: GroupSnapshot, title: str, ids: Sequence[str], by_id: dict[str, Member]
) -> list[str]:
    if not ids:
        return []
    lines = [f"**{title}:**", ""]
    for incident_id in ids[:50]:
        m = by_id.get(incident_id)
        if m is None:
            lines.append(f"- `{incident_id}`")
            continue
        field = md_code(m.field, 120) if m.field else md_code(short_name(m.entity), 120)
        lines.append(
            f"- {field} in {md_code(short_name(m.model), 80)}: {change_word(group, m)} "
            f"({m.severity.value})"
        )
    if len(ids) > 50:
        lines.append(f"- … and {len(ids) - 50} more")
    return [*lines, ""]


def _fit(body: str) -> str:
    if len(body) <= BODY_LIMIT:
        return body
    cut = body[:_SAFE_BODY]
    # Never leave a code fence open: the rest of the page would render as code.
    if cut.count("```") % 2:
        cut += "\n```"
    return cut + "\n\n*(cut to GitHub's size limit; the full list is in DataHub)*"


__all__ = ["comment_body", "headline", "issue_body", "issue_title"]
