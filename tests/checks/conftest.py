"""Fixtures for the check tests: real DataHub aspects in, domain Nodes out.

Tests write the metadata the way DataHub holds it (``datahub.metadata.schema_classes``) and
turn it into a :class:`~mlcopilot.model.Node` with the ``make_node`` fixture, through the
catalog's own translation (``mlcopilot.catalog.aspects``), so each test case reads as "these
aspects in, these findings out" and exercises the same path a real scan takes.
"""

from __future__ import annotations

from typing import Any, Protocol

import pytest

from mlcopilot.catalog.aspects import node_from_aspects, to_json
from mlcopilot.model import Node


class MakeNode(Protocol):
    """The ``make_node`` fixture: ``make_node(urn, *aspects)``."""

    def __call__(self, urn: str, *aspects: Any) -> Node: ...


@pytest.fixture
def make_node() -> MakeNode:
    """``make_node(urn, *aspects)``: a Node from DataHub aspects (none: not in the catalog)."""

    def make(urn: str, *aspects: Any) -> Node:
        return node_from_aspects(urn, {a.ASPECT_NAME: to_json(a) for a in aspects})

    return make
