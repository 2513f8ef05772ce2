"""A local Microsoft Teams Workflows webhook (Power Automate), and a reader for its cards.

``POST /workflows/<id>/triggers/manual/paths/invoke?api-version=2016-06-01&sp=…&sv=1.0&sig=…``
as the "When a Teams webhook request is received" trigger answers it:

- ``202 Accepted`` with an empty body when the flow was triggered (the card is recorded in
  :attr:`FakeTeams.cards`);
- ``401`` when the signature is missing or wrong, ``404`` when no such workflow exists (or it
  was deleted: :attr:`FakeTeams.deleted`), ``400`` when a query parameter is missing or wrong,
  each with Logic Apps' ``{"error": {"code": …, "message": …}}``;
- ``415`` for a body that is not JSON, ``400`` for a message that is not an Adaptive Card
  message: ``type`` ``message``, exactly one attachment of content type
  ``application/vnd.microsoft.card.adaptive`` whose content is an ``AdaptiveCard`` with a
  ``version`` and a ``body`` list, every element and action of a known type (``TextBlock``
  with text, ``FactSet`` with facts, ``ColumnSet`` of ``Column``, ``Container``, ``ActionSet``,
  ``Action.OpenUrl`` with an http(s) ``url``);
- ``413`` for a body over Teams' 28 KB message limit.

:meth:`FakeTeams.stall` makes the fake take a card and then hold its answer back, as a flow
that was triggered while the answer was lost. :func:`read` renders a card's markdown text the
way Teams' desktop and web clients do (CommonMark through markdown-it, the parser the Adaptive
Cards JavaScript renderer uses), so a test asserts on what a reader sees: the text, the links,
any formatting.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from testing.fakes.http import FakeServer, Request, Response

WORKFLOW_ID = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
SIG = "SiGnAtUrE-0123456789_abcdefghijklmnopqrstu"  # 43 characters, as Logic Apps makes them
API_VERSION = "2016-06-01"
SP = "/triggers/manual/run"
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
MESSAGE_LIMIT = 28 * 1024
ELEMENTS = frozenset({"TextBlock", "FactSet", "ColumnSet", "Container", "ActionSet"})
ACTIONS = frozenset({"Action.OpenUrl"})
VERSIONS = frozenset({"1.0", "1.1", "1.2", "1.3", "1.4", "1.5"})
_PATH = r"/workflows/(?P<id>[^/]+)/triggers/manual/paths/invoke"


def _error(status: int, code: str, message: str) -> Response:
    return Response(status, {"error": {"code": code, "message": message}})


class FakeTeams(FakeServer):
    def __init__(self, *, workflow_id: str = WORKFLOW_ID, sig: str = SIG) -> None:
        super().__init__()
        self.workflow_id = workflow_id
        self.sig = sig
        self.deleted = False
        self.cards: list[dict[str, Any]] = []
        """The content of every card accepted, in order."""
        self._stall = 0.0
        self._guard = threading.Lock()
        self.route("POST", _PATH, self._invoke)

    @property
    def path(self) -> str:
        return f"/workflows/{self.workflow_id}/triggers/manual/paths/invoke"

    @property
    def webhook_url(self) -> str:
        return self.url_with(sig=self.sig)

    def url_with(self, *, sig: str, workflow_id: str | None = None) -> str:
        """The webhook URL as Teams shows it, with ``sig`` (and another workflow id) in it."""
        path = f"/workflows/{workflow_id or self.workflow_id}/triggers/manual/paths/invoke"
        return (
            f"{self.url}{path}?api-version={API_VERSION}&sp=%2Ftriggers%2Fmanual%2Frun"
            f"&sv=1.0&sig={sig}"
        )

    def stall(self, seconds: float) -> None:
        """From now on, take each card, then hold the 202 back ``seconds`` (0: answer at once)."""
        self._stall = seconds

    # --- the trigger

    def _invoke(self, request: Request, m: re.Match[str]) -> Response:
        query = request.query
        if m.group("id") != self.workflow_id or self.deleted:
            return _error(
                404, "WorkflowNotFound", f"The workflow '{m.group('id')}' could not be found."
            )
        if query.get("api-version") != API_VERSION:
            return _error(
                400, "InvalidApiVersionParameter", "The api-version query parameter is required."
            )
        if query.get("sig") != self.sig or query.get("sp") != SP or query.get("sv") != "1.0":
            return _error(
                401,
                "DirectApiInvalidAuthorizationSignature",
                "The provided authorization signature is not valid.",
            )
        if len(request.body) > MESSAGE_LIMIT:
            return _error(
                413,
                "MessageTooLarge",
                f"The message is {len(request.body)} bytes; the limit is {MESSAGE_LIMIT}.",
            )
        if "application/json" not in request.headers.get("content-type", ""):
            return _error(415, "UnsupportedMediaType", "The content type must be JSON.")
        try:
            data = json.loads(request.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return _error(400, "InvalidRequestContent", "The request content is not valid JSON.")
        problems = message_problems(data)
        if problems:
            return _error(400, "InvalidRequestContent", "; ".join(problems[:5]))
        with self._guard:
            self.cards.append(data["attachments"][0]["content"])
        if self._stall:
            self._stopping.wait(self._stall)
        return Response(202, None)


# --- the message's shape


def message_problems(data: Any) -> list[str]:
    """What is wrong with a Workflows message carrying one Adaptive Card (empty: nothing)."""
    if not isinstance(data, dict) or data.get("type") != "message":
        return ["type must be 'message'"]
    attachments = data.get("attachments")
    if not isinstance(attachments, list) or len(attachments) != 1:
        return ["attachments must hold exactly one card"]
    (attachment,) = attachments
    if not isinstance(attachment, dict) or attachment.get("contentType") != CARD_TYPE:
        return [f"attachments[0].contentType must be {CARD_TYPE}"]
    card = attachment.get("content")
    if not isinstance(card, dict) or card.get("type") != "AdaptiveCard":
        return ["attachments[0].content.type must be AdaptiveCard"]
    problems: list[str] = []
    if card.get("version") not in VERSIONS:
        problems.append(f"version {card.get('version')!r} is not an Adaptive Cards version")
    body = card.get("body")
    if not isinstance(body, list):
        problems.append("body must be a list")
    else:
        for n, element in enumerate(body):
            problems += _element_problems(element, f"body[{n}]")
    actions = card.get("actions", [])
    if not isinstance(actions, list):
        problems.append("actions must be a list")
    else:
        for n, action in enumerate(actions):
            problems += _action_problems(action, f"actions[{n}]")
    return problems


def _element_problems(element: Any, where: str) -> list[str]:
    if not isinstance(element, dict) or element.get("type") not in ELEMENTS:
        kind = element.get("type") if isinstance(element, dict) else element
        return [f"{where}: unknown element type {kind!r}"]
    kind = element["type"]
    if kind == "TextBlock":
        text = element.get("text")
        return [] if isinstance(text, str) and text else [f"{where}: a TextBlock needs text"]
    if kind == "FactSet":
        facts = element.get("facts")
        if not isinstance(facts, list) or not facts:
            return [f"{where}: a FactSet needs facts"]
        return [
            f"{where}.facts[{n}]: a fact needs a title and a value"
            for n, fact in enumerate(facts)
            if not isinstance(fact, dict)
            or not isinstance(fact.get("title"), str)
            or not isinstance(fact.get("value"), str)
        ]
    if kind == "ColumnSet":
        problems: list[str] = []
        for n, column in enumerate(element.get("columns") or []):
            if not isinstance(column, dict) or column.get("type") != "Column":
                problems.append(f"{where}.columns[{n}]: not a Column")
                continue
            problems += _items_problems(column.get("items") or [], f"{where}.columns[{n}]")
        return problems
    if kind == "Container":
        return _items_problems(element.get("items"), where)
    # ActionSet
    actions = element.get("actions")
    if not isinstance(actions, list):
        return [f"{where}: an ActionSet needs actions"]
    return [p for n, a in enumerate(actions) for p in _action_problems(a, f"{where}[{n}]")]


def _items_problems(items: Any, where: str) -> list[str]:
    if not isinstance(items, list):
        return [f"{where}: items must be a list"]
    return [p for n, e in enumerate(items) for p in _element_problems(e, f"{where}.items[{n}]")]


def _action_problems(action: Any, where: str) -> list[str]:
    if not isinstance(action, dict) or action.get("type") not in ACTIONS:
        kind = action.get("type") if isinstance(action, dict) else action
        return [f"{where}: unknown action type {kind!r}"]
    url = action.get("url")
    if not isinstance(url, str) or not re.match(r"https?://", url):
        return [f"{where}: Action.OpenUrl needs an http(s) url"]
    return []


# --- what a reader sees


@dataclass(frozen=True)
class Reading:
    """A card text as Teams shows it."""

    text: str
    """The visible characters, inline code's included."""
    links: tuple[str, ...] = ()
    """Every link's target (markdown links and autolinks)."""
    marks: frozenset[str] = field(default_factory=frozenset)
    """Every formatting that rendered: ``strong``, ``em``, ``s``, ``code``, ``image``,
    ``html``, ``heading``, ``list``, ``quote``..."""


_MARKDOWN = MarkdownIt("commonmark").enable("strikethrough")
_BLOCK_MARKS = {
    "heading_open": "heading",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "code_block": "code",
    "fence": "code",
    "html_block": "html",
    "hr": "rule",
}
_INLINE_MARKS = {
    "strong_open": "strong",
    "em_open": "em",
    "s_open": "s",
    "code_inline": "code",
    "image": "image",
    "html_inline": "html",
    "link_open": "link",
}


def read(text: str) -> Reading:
    """``text`` rendered as markdown: what it shows, where it links, how it is formatted."""
    shown: list[str] = []
    links: list[str] = []
    marks: set[str] = set()
    for token in _MARKDOWN.parse(text):
        if token.type in _BLOCK_MARKS:
            marks.add(_BLOCK_MARKS[token.type])
            shown.append(token.content)
        for child in _inline(token):
            if child.type in _INLINE_MARKS:
                marks.add(_INLINE_MARKS[child.type])
            if child.type == "link_open":
                links.append(str(child.attrGet("href")))
            if child.type == "image":
                links.append(str(child.attrGet("src")))
            if child.type in ("text", "code_inline", "html_inline"):
                shown.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                shown.append(" ")
    return Reading("".join(shown), tuple(links), frozenset(marks))


def _inline(token: Token) -> Iterator[Token]:
    if token.type == "inline":
        yield from token.children or ()


# --- a card's parts


def elements(card: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every element of ``card``'s body, containers' and columns' items included, in order."""

    def walk(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for element in items:
            yield element
            if element["type"] == "Container":
                yield from walk(element["items"])
            elif element["type"] == "ColumnSet":
                for column in element.get("columns") or []:
                    yield from walk(column.get("items") or [])

    return walk(card["body"])


def texts(card: dict[str, Any]) -> list[str]:
    """Every TextBlock's text as a reader sees it."""
    return [read(e["text"]).text for e in elements(card) if e["type"] == "TextBlock"]


def facts(card: dict[str, Any]) -> list[tuple[str, str]]:
    """Every fact (title, value) as a reader sees it, FactSet after FactSet."""
    return [
        (read(f["title"]).text, read(f["value"]).text)
        for e in elements(card)
        if e["type"] == "FactSet"
        for f in e["facts"]
    ]


def buttons(card: dict[str, Any]) -> list[tuple[str, str]]:
    """Every Action.OpenUrl (title, url), the card's and its ActionSets'."""
    found = [(a["title"], a["url"]) for a in card.get("actions", [])]
    for e in elements(card):
        if e["type"] == "ActionSet":
            found += [(a["title"], a["url"]) for a in e["actions"]]
    return found
