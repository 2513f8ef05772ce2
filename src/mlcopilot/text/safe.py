"""Untrusted text made safe for GitHub markdown, Mermaid and Slack mrkdwn.

Everything read from the catalog — column names, descriptions, urns, messages that quote
them — is attacker-controllable by anyone who can ingest metadata. Before it goes into a
notification it is cleaned (control, bidi and zero-width characters removed; whitespace
collapsed), cut to a size, and then put where nothing in it can render: GitHub inline code
spans and fenced blocks with a fence longer than any backtick run inside, GitHub prose that
quotes them with every markdown character escaped and mentions in code spans, Mermaid labels
with every unusual character as an entity, Slack text with ``&``, ``<`` and ``>`` escaped and
inside code. No mention, link, image, HTML or fake marker can come out of a column name. The
terminal shows the same cleaned text (``mlcopilot scan``), with rich markup escaped.
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


_MD_SPECIAL = re.compile(r"[\\`*\[\]<>|~$&!#]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
"""What starts markdown or HTML in prose: backslash-escaped (an intraword ``_`` is inert)."""
_MD_LEADING = re.compile(r"^(?:[-+=]|\d+[.)])(?=\s|$)")
"""A list marker or heading underline at the start of a line."""
_MD_REFERENCE = re.compile(r"(?<![\w`])(?:@[\w./-]+|(?:[\w.-]+/[\w.-]+)?#\d+|GH-\d+)")
"""What GitHub links with a side effect: an ``@mention`` (a notification), an issue reference
(a timeline event on that issue). An escape does not stop them, a code span does."""


def md_text(text: str, limit: int = 400, *, in_table: bool = False) -> str:
    """``text`` as GitHub markdown prose that renders as written and links nothing.

    For messages that quote catalog values: cleaned like :func:`clean`, each backtick-quoted
    part as a code span (:func:`md_code`), mentions and issue references as code spans, and
    every other character that could start markdown, HTML or math escaped. No heading, list,
    link, image, tag, mention or cross-reference can come out of it. ``in_table``: it goes
    in a table cell, where even a code span's ``|`` must be escaped.
    """
    value = clean(text, limit)
    parts = re.split(r"`+", value)
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span, the whole text is prose
        parts = [value]
    shown = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            shown.append(_md_prose(part, in_table))
        elif part.strip():  # the quoted value in a span, the spaces around it outside
            lead, trail = part[: len(part) - len(part.lstrip())], part[len(part.rstrip()) :]
            shown.append(lead + md_code(part, limit, in_table=in_table) + trail)
    return _MD_LEADING.sub(lambda m: "\\" + m.group(), "".join(shown), count=1)


def _md_prose(text: str, in_table: bool) -> str:
    shown, start = [], 0
    for match in _MD_REFERENCE.finditer(text):
        shown.append(_MD_SPECIAL.sub(lambda m: "\\" + m.group(), text[start : match.start()]))
        shown.append(md_code(match.group(), in_table=in_table))
        start = match.end()
    shown.append(_MD_SPECIAL.sub(lambda m: "\\" + m.group(), text[start:]))
    return "".join(shown)


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
