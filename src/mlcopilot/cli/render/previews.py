"""Previews of the sinks' requests, on screen and on disk, as the demo and the dry run show them.

``mlcopilot demo`` and ``mlcopilot scan --dry-run --preview DIR`` show and save them alike.

A preview (:class:`~mlcopilot.notify.sinks.preview.Preview`) is saved as one JSON file per
request, numbered in the order the sinks made them (``001-github-open.json``,
``003-pagerduty-trigger.json``...)::

    {"request": "POST /v2/enqueue", "json": {...the body, decoded...}}

and, for the signed webhook, the headers its receiver reads (``Idempotency-Key``,
``X-Mlcopilot-Timestamp``, ``X-Mlcopilot-Signature``) and a note that the signature is made
with the placeholder secret. No file holds a secret: the preview sinks never have one.

On screen each request is one line (:func:`line`): ``pagerduty trigger: <summary> (severity
error, dedup_key …)``, ``teams card: <title>``, ``webhook incident.opened: <group>``,
``github open: POST /repos/…/issues — title: …``. Catalog text is shown through
:func:`~mlcopilot.cli.render.terminal.safe` by the callers that print it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from mlcopilot.cli.render.terminal import safe
from mlcopilot.errors import UsageError
from mlcopilot.incidents.payload import decode_notification
from mlcopilot.model import sink_of
from mlcopilot.notify.content import headline
from mlcopilot.notify.sinks.preview import PREVIEW_WEBHOOK_SECRET, Preview, RowPreview
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

SAVED_GLOB = "[0-9][0-9][0-9]-*.json"
"""The files a preview folder holds (``001-github-open.json``...)."""
_SAVED = re.compile(r"[0-9]{3}-[a-z0-9_-]+\.json")
SIGNATURE_NOTE = (
    f"X-Mlcopilot-Signature is made with the placeholder secret {PREVIEW_WEBHOOK_SECRET!r}, "
    "not yours, and X-Mlcopilot-Timestamp is the preview's time: each real attempt is "
    'stamped and signed with your secret as it is sent. The body ("json", sent compact: no '
    "spaces, UTF-8) and Idempotency-Key are what your receiver gets."
)
"""What a saved webhook preview says about its signature."""
_SINK_NAMES = {
    "github": "GitHub",
    "slack": "Slack",
    "pagerduty": "PagerDuty",
    "teams": "Teams",
    "webhook": "your webhook",
}


# --- on disk


def file_name(number: int, preview: Preview) -> str:
    """``001-github-open.json``: the request's number, its sink and its action."""
    return f"{number:03d}-{preview.sink}-{preview.action.replace(' ', '-')}.json"


def file_content(preview: Preview) -> dict[str, object]:
    """What a preview's file holds: the request line and the body, decoded.

    For the webhook, also the headers its receiver reads and :data:`SIGNATURE_NOTE`.
    """
    content: dict[str, object] = {"request": preview.request, "json": preview.payload}
    if preview.headers:
        content["headers"] = dict(preview.headers)
    if preview.sink == "webhook":
        content["note"] = SIGNATURE_NOTE
    return content


def save(folder: Path, number: int, preview: Preview) -> Path:
    """Write ``preview`` as request ``number`` in ``folder`` (made if need be); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(number, preview)
    text = json.dumps(file_content(preview), indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def check_folder(folder: Path, flag: str) -> None:
    """Refuse ``folder`` unless it is new, empty, or holds only earlier previews.

    Checked before anything runs; the earlier previews are replaced by :func:`clear`.

    Raises:
        UsageError: It is a file, holds other files, or cannot be made.
    """
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {folder}: not a folder")
    if folder.is_dir():
        others = sorted(p.name for p in folder.iterdir() if not _SAVED.fullmatch(p.name))
        if others:
            raise UsageError(
                f"{flag} {folder}: the folder holds files that are not previews "
                f"({', '.join(others[:3])}{', …' if len(others) > 3 else ''}); use an empty "
                "or new folder (earlier previews in it are replaced)"
            )
        return
    parent = next((p for p in folder.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageError(f"{flag} {folder}: cannot be made")


def clear(folder: Path) -> None:
    """Remove the earlier previews from ``folder`` (only those)."""
    for old in folder.glob(SAVED_GLOB) if folder.is_dir() else ():
        if _SAVED.fullmatch(old.name):
            old.unlink()


# --- on screen


def sinks_named(sinks: Sequence[str]) -> str:
    """``GitHub, Slack and your webhook``: the sinks as a sentence names them."""
    names = [_SINK_NAMES.get(s, s) for s in dict.fromkeys(sinks)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def line(preview: Preview) -> str:
    """The request in one line, its sink first (plain text: escape it where markup is parsed)."""
    return f"{preview.sink} {describe(preview)}"


def describe(preview: Preview) -> str:
    """:func:`line` without the sink's name: ``trigger: <summary> (severity error, …)``."""
    payload = preview.payload
    if preview.sink == "pagerduty":
        key = payload.get("dedup_key", "")
        if preview.action != "trigger":
            return f"{preview.action}: dedup_key {key}"
        event = payload.get("payload") or {}
        return (
            f"trigger: {event.get('summary', '')} (severity {event.get('severity', '')}, "
            f"dedup_key {key})"
        )
    if preview.sink == "teams":
        return f"card: {_card_title(payload)}"
    if preview.sink == "webhook":
        group = payload.get("group") or {}
        incidents = count(len(payload.get("incidents") or []), "incident")
        return (
            f"{payload.get('type', preview.action)}: {group.get('check_title', '')} at "
            f"{short_name(str(group.get('entity', '')))} (group {group.get('key', '')}, "
            f"{incidents})"
        )
    return f"{preview.action}: {preview.request} — {summary(preview)}"


def summary(preview: Preview) -> str:
    """What a GitHub or Slack request says: an issue's title, a comment's line, a message's text."""
    payload = preview.payload
    if preview.sink == "github" and preview.action == "open":
        body_lines = str(payload["body"]).count("\n") + 1
        body = f"{count(body_lines, 'line')} of markdown, Mermaid diagram"
        return f"title: {payload['title']}  (body: {body})"
    if preview.sink == "github":
        first = next((x for x in str(payload.get("body", "")).splitlines()[1:] if x.strip()), "")
        return first or json.dumps(payload)
    blocks = count(len(payload.get("blocks", [])), "Block Kit block")
    return f"text: {payload.get('text', '')}  ({blocks})"


def block_text(block: Mapping[str, object]) -> str:
    """A Slack Block Kit block's text (a context block's elements, joined)."""
    if block.get("type") == "context":
        elements = block.get("elements")
        return (
            " ".join(str(e.get("text", "")) for e in elements) if isinstance(elements, list) else ""
        )
    text = block.get("text")
    return str(text.get("text", "")) if isinstance(text, dict) else ""


def _card_title(payload: Mapping[str, object]) -> str:
    """The card's title as Teams shows it (its markdown escapes undone)."""
    attachments = payload.get("attachments")
    card = attachments[0].get("content", {}) if isinstance(attachments, list) else {}
    body = card.get("body") if isinstance(card, dict) else None
    first = body[0] if isinstance(body, list) and body else {}
    text = str(first.get("text", "")) if isinstance(first, dict) else ""
    return re.sub(r"\\(.)", r"\1", text)


def print_dry_run(
    rows: Sequence[RowPreview],
    saved: Sequence[Path],
    folder: Path,
    console: Console,
    *,
    configured: bool = True,
) -> None:
    """Say what ``scan --dry-run --preview`` saved, one line a request; and what sends nothing.

    ``saved`` are the files, in the order of the rows' previews; ``configured``: whether any
    notification sink is.
    """
    requests = sum(len(r.previews) for r in rows)
    if not rows:
        why = "" if configured else " (no notification sink is configured)"
        console.print(
            f"Nothing to preview in {escape(str(folder))}: the dry run plans no notification{why}.",
            soft_wrap=True,
        )
        return
    sinks = sinks_named(
        [p.sink for r in rows for p in r.previews] or [sink_of(r.row.sink) for r in rows]
    )
    console.print()
    console.print(
        f"What {escape(sinks)} would receive ({count(requests, 'request')}, sent to nobody; "
        f"saved under {escape(str(folder))}):",
        soft_wrap=True,
    )
    files = iter(saved)
    for row in rows:
        for preview in row.previews:
            console.print(f"  {escape(next(files).name)}  {safe(line(preview))}", soft_wrap=True)
        if not row.previews or row.note:
            said = headline_of(row)
            why = row.note or "the sink sends nothing for this row"
            console.print(
                f"  [dim]{safe(row.row.sink)} {row.row.action} ({safe(said)}): {safe(why)}[/]",
                soft_wrap=True,
            )


def headline_of(row: RowPreview) -> str:
    """The row's headline (``PII exposure at raw.customers (1 model, 1 finding)``)."""
    return headline(decode_notification(row.row.payload))
