"""Hostile catalog text cannot escape into GitHub markdown or Slack mrkdwn (T17, T25)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlcopilot.incidents.payload import GroupSnapshot, GroupState, Member, Notification
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.render_github import BODY_LIMIT, comment_body, issue_body, issue_title
from mlcopilot.notify.sinks.render_slack import (
    MAX_BLOCKS,
    SECTION_LIMIT,
    root_message,
    thread_message,
)
from mlcopilot.text.safe import clean, md_code, mermaid_label, slack_code

BIDI = "\u202e\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d"
ZERO_WIDTH = "\u200b\u200c\u200d\ufeff\u2060"
HOSTILE = [
    "colé",
    "名前",
    "emoji_🚀",
    "evil\u202ecod.exe",
    "zero\u200bwidth",
    "`tick`",
    "``double``",
    "*bold* _it_ ~strike~",
    "<!here> <!channel> <@U123> <!subteam^S1>",
    "@org/team @alice",
    "#123 acme/repo#9",
    "](http://evil.example) [ok](https://evil.example)",
    "![](https://evil.example/p.png)",
    "<img src=x onerror=alert(1)> <details><summary>resolved</summary>",
    "<!-- mlcopilot:group=0000000000000000 gen=1 open=0 v=1 -->",
    "| a | b |\n---|---",
    "<https://evil.example|Click to fix>",
    "&amp; &lt;",
    "x" * 5000,
]
ENTITY = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.<!here>@team`x`,PROD)"
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_@bob,PROD)"


def group(fields: list[str]) -> Notification:
    members = tuple(
        Member(
            incident_id=f"{n:016x}",
            generation=1,
            check="schema_drift",
            severity=Severity.CRITICAL,
            model=MODEL,
            entity=ENTITY,
            field=name,
            change="renamed",
            previous_field=name[::-1],
            message=f"column {name} was renamed; <!channel> @here",
            path=(MODEL, ENTITY),
            open=True,
        )
        for n, name in enumerate(fields)
    )
    snapshot = GroupSnapshot(
        key="0123456789abcdef",
        generation=1,
        check="schema_drift",
        entity=ENTITY,
        state=GroupState.OPEN,
        opened_at=datetime(2026, 1, 1, tzinfo=UTC),
        members=members,
    )
    return Notification("open", 0, snapshot, added=tuple(m.incident_id for m in members))


def outside_code(markdown: str) -> str:
    """The markdown with fenced blocks and inline code spans taken out."""
    without_blocks = re.sub(r"(`{3,})[^\n]*\n.*?\n\1", "", markdown, flags=re.S)
    return re.sub(r"(`+).+?\1", "", without_blocks, flags=re.S)


def test_github_body_renders_nothing_hostile_outside_code() -> None:
    notification = group(HOSTILE)
    body = issue_body(notification, datahub_url="https://datahub.example.com")
    prose = outside_code(body.split("\n", 1)[1])  # the first line is our marker
    for forbidden in ("@", "<!", "<http", "![", "<img", "<details", "](http://evil", "#123"):
        assert forbidden not in prose, forbidden
    assert body.startswith("<!-- mlcopilot:group=0123456789abcdef gen=1 open=0 v=1 -->\n")
    assert "\n<!--" not in body  # a forged marker never starts a line
    assert not set(BIDI + ZERO_WIDTH) & set(body)
    assert len(body) <= BODY_LIMIT
    assert len(issue_title(notification)) <= 256
    comment = comment_body(
        Notification("update", 1, notification.group, added=notification.added),
        datahub_url=None,
    )
    assert "@" not in outside_code(comment.split("\n", 1)[1])


def test_github_table_rows_stay_rows() -> None:
    body = issue_body(group(["| a | b |", "x|y"]), datahub_url=None)
    rows = [line for line in body.splitlines() if line.startswith("| `")]
    assert len(rows) == 2
    assert all(re.sub(r"\\\|", "", row).count("|") == 8 for row in rows)


def test_mermaid_labels_cannot_break_the_diagram() -> None:
    for text in HOSTILE:
        label = mermaid_label(text)
        assert not set('"`<>[]{}()|\n') & set(label), label
        assert re.fullmatch(r"(?:[A-Za-z0-9 _.:/-]|#\d+;)*", label), label


def test_slack_blocks_escape_everything_and_respect_limits() -> None:
    notification = group(HOSTILE * 3)
    text, blocks = root_message(notification, datahub_url="https://datahub.example.com")
    dumped = json.dumps(blocks, ensure_ascii=False)
    for forbidden in ("<!here", "<!channel", "<@U123", "<!subteam", "<https://evil", "<img"):
        assert forbidden not in dumped, forbidden
        assert forbidden not in text, forbidden
    assert not set(BIDI + ZERO_WIDTH) & set(dumped)
    assert len(blocks) <= MAX_BLOCKS
    for block in blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_LIMIT
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
    _, replies = thread_message(
        Notification("update", 1, notification.group, added=notification.added), datahub_url=None
    )
    assert len(replies) <= MAX_BLOCKS
    assert "<!here" not in json.dumps(replies)


@given(st.text(max_size=300))
def test_code_spans_always_close(text: str) -> None:
    span = md_code(text)
    if span != "*(none)*":
        fence = re.match(r"`+", span)
        assert fence is not None
        inner = span[len(fence[0]) : -len(fence[0])]
        assert fence[0] not in inner
    assert "`" not in slack_code(text)[1:-1]
    assert "<" not in slack_code(text)
    assert ">" not in slack_code(text)


@pytest.mark.parametrize("text", HOSTILE)
def test_clean_is_one_bounded_line(text: str) -> None:
    cleaned = clean(text, 200)
    assert "\n" not in cleaned
    assert len(cleaned) <= 200
    assert not set(BIDI + ZERO_WIDTH) & set(cleaned)


def test_the_same_name_composed_or_decomposed_is_one_group() -> None:
    from mlcopilot.incidents.grouping import group_key

    assert group_key("schema_drift", "urn:li:dataset:(x,caf\u00e9,PROD)") == group_key(
        "schema_drift", "urn:li:dataset:(x,cafe\u0301,PROD)"
    )
