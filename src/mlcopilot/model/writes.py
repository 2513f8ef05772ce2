"""Write-back intents: what the product wants the catalog to hold.

Catalog adapters turn them into DataHub aspects, compare with what is there and write only
the difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

from mlcopilot.model.catalog import Urn


@dataclass(frozen=True, slots=True)
class TagWrite:
    """Tag ``tag`` should be present on (or absent from) ``entity``."""

    entity: Urn
    tag: Urn
    present: bool


@dataclass(frozen=True, slots=True)
class PropertyWrite:
    """Structured property ``property`` on ``entity`` should hold exactly ``values``.

    An empty ``values`` removes the property. Other properties on the entity are kept.
    """

    entity: Urn
    property: Urn
    values: tuple[str | float, ...]


class Rendering:
    """An object that renders text fields of writes, each by its method the field names.

    One per planned incident in place of a function per field, or a string: an estate's
    write-back plans 282,022 incidents and as many documents, and with their urns held as
    strings (about 110 bytes each) the plan added 100 MB to a second scan's RSS, 48 MB
    without; a title string and a rendering object each for the incident and its document
    were 44 MB more (stage probe).
    """

    __slots__ = ()


class RenderedText:
    """A dataclass field holding a text, or how to render it; read, it is always the text.

    Given a function, the text is rendered on each read and not kept; given a
    :class:`Rendering`, its method named ``method`` (the field's name by default) renders it.
    A scan's write-back plans
    a document and an incident for every incident, and an estate's 280,000 markdown bodies
    were a fifth of its peak memory, held from planning to the end of the scan while each is
    needed only a moment (compared with the catalog, encoded into the outbox, written).
    Equality, hashing, ``asdict`` and ``replace`` read the field, so they see the text.
    """

    def __init__(self, method: str | None = None) -> None:
        self._given = method

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name
        self._key = f"_{name}"
        self._method = self._given or name

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> RenderedText: ...

    @overload
    def __get__(self, instance: object, owner: type[Any]) -> str: ...

    def __get__(self, instance: object | None, owner: type[Any]) -> str | RenderedText:
        if instance is None:
            # Read on the class (dataclasses look for a default this way): there is none.
            raise AttributeError(self._name)
        value: str | Callable[[], str] | Rendering = getattr(instance, self._key)
        if isinstance(value, Rendering):
            text: str = getattr(value, self._method)()
            return text
        return value() if callable(value) else value

    def __set__(self, instance: object, value: str | Callable[[], str] | Rendering) -> None:
        object.__setattr__(instance, self._key, value)  # past a frozen class's __setattr__


@dataclass(frozen=True, kw_only=True)
class DocumentWrite:
    """A DataHub ``document`` entity holding an incident's full context in markdown.

    ``urn``, ``title`` and ``text`` may be given as a function that renders them, or a
    :class:`Rendering` (see :class:`RenderedText`; its ``document_urn`` renders the urn, as
    one rendering serves an incident and its document). Every field is given by name (type
    checkers take the descriptor for a default, which it is not: leaving ``text`` out is a
    TypeError). Its slots are spelled out: ``slots=True`` would make one named ``text``,
    where the descriptor is; it keeps the value in ``_text``.
    """

    __slots__ = ("_text", "_title", "_urn", "created_at", "modified_at", "related_assets")

    urn: RenderedText = RenderedText("document_urn")
    title: RenderedText = RenderedText()
    text: RenderedText = RenderedText()
    related_assets: tuple[Urn, ...]
    created_at: datetime
    modified_at: datetime


@dataclass(frozen=True, kw_only=True)
class IncidentWrite:
    """A native DataHub incident (``incidentInfo``) on a deterministic urn.

    ``urn``, ``title`` and ``description`` may be given as a function that renders them, or a
    :class:`Rendering`, as a document's (see :class:`DocumentWrite`, whose slots are spelled
    out for the same reason).
    """

    __slots__ = (
        "_description",
        "_title",
        "_urn",
        "active",
        "created_at",
        "custom_type",
        "entities",
        "incident_type",
        "priority",
        "status_changed_at",
    )

    urn: RenderedText = RenderedText()
    incident_type: str
    custom_type: str | None
    title: RenderedText = RenderedText()
    description: RenderedText = RenderedText()
    priority: int
    entities: tuple[Urn, ...]
    active: bool
    created_at: datetime
    status_changed_at: datetime


Write = TagWrite | PropertyWrite | IncidentWrite | DocumentWrite
