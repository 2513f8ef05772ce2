"""A small element tree from :mod:`html.parser`, to read the report's DOM without a browser."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


@dataclass
class Element:
    """One element: its tag, attributes, children and the text directly inside it."""

    tag: str
    attrs: dict[str, str]
    parent: Element | None = None
    children: list[Element] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def text(self) -> str:
        """All the text inside, as a browser's ``textContent``."""
        return "".join(self.texts) + "".join(child.text for child in self.children)

    def walk(self) -> Iterator[Element]:
        for child in self.children:
            yield child
            yield from child.walk()

    def find(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        """Every descendant with ``tag`` (any: None) and class ``cls`` (any: None)."""
        return [
            e
            for e in self.walk()
            if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)
        ]

    def ancestors(self) -> Iterator[Element]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.open = self.root
        self.unclosed: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, self.open)
        self.open.children.append(element)
        if tag not in VOID:
            self.open = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.open))

    def handle_endtag(self, tag: str) -> None:
        node: Element | None = self.open
        while node is not None and node.tag != tag:
            node = node.parent
        if node is None or node.parent is None:
            self.unclosed.append(f"stray </{tag}>")
            return
        if node is not self.open:
            self.unclosed.append(f"<{self.open.tag}> closed by </{tag}>")
        self.open = node.parent

    def handle_data(self, data: str) -> None:
        self.open.texts.append(data)


def parse(page: str) -> Element:
    """The page's tree; fails on mis-nested or unclosed elements (the page is well formed)."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    assert builder.unclosed == [], builder.unclosed
    assert builder.open is builder.root, f"<{builder.open.tag}> never closed"
    return builder.root
