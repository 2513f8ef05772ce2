"""A write's urn and text: given as a function or a Rendering, made on each read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from mlcopilot.model import DocumentWrite, IncidentWrite, Rendering
from mlcopilot.notify.sinks.datahub import decode_writes, encode_writes

WHEN = datetime(2026, 1, 2, tzinfo=UTC)
BODY = "# [mlcopilot] schema drift at orders\n\nColumn `id` was removed.\n"


def _document(text: str | Callable[[], str]) -> DocumentWrite:
    return DocumentWrite(
        urn="urn:li:document:mlcopilot-1",
        title="[mlcopilot] schema drift at orders",
        text=text,
        related_assets=("urn:li:dataset:(urn:li:dataPlatform:hive,orders,PROD)",),
        created_at=WHEN,
        modified_at=WHEN,
    )


class _Renders:
    """A renderer that counts how often it was asked."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return BODY


def test_a_rendered_text_reads_equals_hashes_and_encodes_as_the_given_text() -> None:
    render = _Renders()
    lazy, eager = _document(render), _document(BODY)
    assert lazy.text == BODY
    assert lazy == eager
    assert hash(lazy) == hash(eager)
    assert dataclasses.asdict(lazy) == dataclasses.asdict(eager)
    assert repr(lazy) == repr(eager)
    assert encode_writes([lazy]) == encode_writes([eager])
    assert decode_writes(encode_writes([lazy])) == [eager]
    assert dataclasses.replace(lazy, title="other").text == BODY
    assert lazy != dataclasses.replace(eager, text=BODY + "more")


def test_the_text_is_rendered_on_each_read_and_not_kept() -> None:
    render = _Renders()
    document = _document(render)
    assert render.calls == 0  # making the write renders nothing
    for expected in (1, 2, 3):
        assert document.text == BODY
        assert render.calls == expected


def test_a_document_write_is_frozen_and_needs_its_text() -> None:
    document = _document(BODY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        document.text = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="text"):
        DocumentWrite(  # type checkers take the descriptor for a default; it is none
            urn="urn:li:document:x", title="t", related_assets=(), created_at=WHEN, modified_at=WHEN
        )


def test_an_incident_description_may_be_rendered_when_read_too() -> None:
    render = _Renders()

    def incident(description: str | Callable[[], str]) -> IncidentWrite:
        return IncidentWrite(
            urn="urn:li:incident:mlcopilot-1",
            incident_type="CUSTOM",
            custom_type="SCHEMA_DRIFT",
            title="[mlcopilot] schema drift at orders",
            description=description,
            priority=1,
            entities=("urn:li:dataset:(urn:li:dataPlatform:hive,orders,PROD)",),
            active=True,
            created_at=WHEN,
            status_changed_at=WHEN,
        )

    lazy, eager = incident(render), incident(BODY)
    assert render.calls == 0
    assert lazy == eager
    assert hash(lazy) == hash(eager)
    assert repr(lazy) == repr(eager)
    assert decode_writes(encode_writes([lazy])) == [eager]
    assert not hasattr(lazy, "__dict__")
    with pytest.raises(TypeError):
        IncidentWrite(urn="u", title="t")  # type: ignore[call-arg]


class _Both(Rendering):
    """One object rendering an incident's and its document's texts, counting what it made."""

    __slots__ = ("made",)

    def __init__(self) -> None:
        self.made: list[str] = []

    def urn(self) -> str:
        self.made.append("urn")
        return "urn:li:incident:mlcopilot-1"

    def title(self) -> str:
        self.made.append("title")
        return "[mlcopilot] schema drift at orders"

    def description(self) -> str:
        self.made.append("description")
        return "Column `id` was removed."

    def document_urn(self) -> str:
        self.made.append("document_urn")
        return "urn:li:document:mlcopilot-1"

    def text(self) -> str:
        self.made.append("text")
        return BODY


def test_a_rendering_makes_each_field_by_its_method_on_every_read() -> None:
    both = _Both()
    write = dataclasses.replace(_document(BODY), urn=both, title=both, text=both)
    assert (write.urn, write.text, write.urn, write.title) == (
        "urn:li:document:mlcopilot-1",
        BODY,
        "urn:li:document:mlcopilot-1",
        "[mlcopilot] schema drift at orders",
    )
    assert both.made == ["document_urn", "text", "document_urn", "title"]


def test_one_rendering_serves_an_incident_and_its_document() -> None:
    both = _Both()
    document = dataclasses.replace(_document(BODY), urn=both, title=both, text=both)
    native = IncidentWrite(
        urn=both,
        incident_type="CUSTOM",
        custom_type="SCHEMA_DRIFT",
        title=both,
        description=both,
        priority=1,
        entities=document.related_assets,
        active=True,
        created_at=WHEN,
        status_changed_at=WHEN,
    )
    assert (native.urn, native.title, native.description) == (
        "urn:li:incident:mlcopilot-1",
        document.title,
        "Column `id` was removed.",
    )
    assert document.urn == "urn:li:document:mlcopilot-1"


def test_a_rendered_write_equals_hashes_and_encodes_as_the_same_write_of_strings() -> None:
    plain = _document(BODY)
    both = _Both()
    rendered = DocumentWrite(
        urn=both,
        title=both,
        text=both,
        related_assets=plain.related_assets,
        created_at=WHEN,
        modified_at=WHEN,
    )
    assert rendered == plain
    assert hash(rendered) == hash(plain)
    assert dataclasses.asdict(rendered) == dataclasses.asdict(plain)
    assert encode_writes([rendered]) == encode_writes([plain])
