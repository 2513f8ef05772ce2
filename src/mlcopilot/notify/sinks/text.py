"""Untrusted text made safe for GitHub markdown, Mermaid and Slack mrkdwn.

Everything read from the catalog — column names, descriptions, urns, messages that quote
them — is attacker-controllable by anyone who can ingest metadata. Before it goes into a
notification it is cleaned (control, bidi and zero-width characters removed; whitespace
collapsed), cut to a size, and then put where nothing in it can render: GitHub inline code
spans and fenced blocks with a fence longer than any backtick run inside, Mermaid labels with
every unusual character as an entity, Slack text with ``&``, ``<`` and ``>`` escaped and inside
code. No mention, link, image, HTML or fake marker can come out of a column name.
"""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
_WHITESPACE = re.compile(r"\s+")
_BACKTICKS = re.compile(r"`+")
_MERMAID_SAFE = re.compile(r"[A-Za-z0-9 _.:/-]")


def clean(text: str, limit: int = 200) -> str:
    """``text`` on one line, without invisible or direction-changing characters, at most ``limit``.

    Removes control characters (Cc), format characters (Cf: bidi overrides and isolates,
    zero-width spaces and joiners, BOM) and line/paragraph separators; collapses whitespace.
    """
    normalized = unicodedata.normalize("NFC", text)
    kept = []
    for char in normalized:
        category = unicodedata.category(char)
        if char in "\t\n\r" or category in ("Zl", "Zp"):
            kept.append(" ")
        elif category in ("Cc", "Cf", "Cs", "Co", "Cn"):
            continue
        else:
            kept.append(char)
    return truncate(_WHITESPACE.sub(" ", "".join(kept)).strip(), limit)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS


# --- GitHub markdown


def md_code(text: str, limit: int = 200, *, in_table: bool = False) -> str:
    """``text`` as a GitHub inline code span that nothing inside can break out of."""
    value = clean(text, limit)
    if not value:
        return "*(none)*"
    if in_table:
        # GFM splits table cells on "|" even inside code spans; an escaped one stays.
        value = value.replace("|", "\\|")
    longest = max((len(run) for run in _BACKTICKS.findall(value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def md_block(lines: list[str], *, language: str = "text") -> str:
    """``lines`` in a fenced code block whose fence no line can close."""
    body = "\n".join(lines)
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{body}\n{fence}"


def mermaid_label(text: str, limit: int = 60) -> str:
    """``text`` for a quoted Mermaid label: anything but plain characters becomes ``#NNN;``."""
    value = clean(text, limit)
    return "".join(c if _MERMAID_SAFE.fullmatch(c) else f"#{ord(c)};" for c in value)


# --- Slack mrkdwn


def slack_escape(text: str) -> str:
    """Escape Slack's three control characters (https://api.slack.com/reference/surfaces/formatting)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_code(text: str, limit: int = 200) -> str:
    """``text`` as Slack inline code: escaped, no backtick inside to end it early."""
    value = clean(text, limit).replace("`", "ˋ")
    return f"`{slack_escape(value)}`" if value else "_(none)_"


def slack_plain(text: str, limit: int) -> str:
    """``text`` for a ``plain_text`` object: cleaned and escaped like all Slack text.

    Slack asks for ``&``, ``<`` and ``>`` to be escaped in every text field; plain text is
    not parsed for mentions, so this is a second fence, not the only one.
    """
    return slack_escape(clean(text, limit))


def slack_text(text: str, limit: int) -> str:
    """``text`` for a mrkdwn field or the message fallback: cleaned and escaped."""
    return slack_escape(clean(text, limit))
