"""Which incident a person means: its whole id, or a unique start of it.

One rule for every front end (``mlcopilot incidents ack|resolve`` and the MCP server's
``explain_incident``, ``acknowledge_incident`` and incident resource), each of which words
what it finds in its own terms (a command's hint, a tool's).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcopilot.model import Incident
from mlcopilot.protocols import StateStore

MIN_PREFIX = 6
"""The shortest start of an id taken for the whole id (16 hex digits)."""


@dataclass(frozen=True, slots=True)
class IdLookup:
    """What a given id names: the one incident, several, none, or too short a start."""

    given: str
    matches: tuple[Incident, ...]
    """The incidents whose id is ``given`` or starts with it (newest first)."""
    too_short: bool = False
    """``given`` is no id and shorter than :data:`MIN_PREFIX`: not looked up as a start."""

    @property
    def found(self) -> Incident | None:
        """The incident named, when exactly one is."""
        return self.matches[0] if len(self.matches) == 1 else None


def look_up(store: StateStore, given: str) -> IdLookup:
    """The incidents ``given`` names in ``store``: the id itself, else ids starting with it.

    The start is compared without surrounding spaces and case (ids are lower-case hex).
    """
    exact = store.get(given)
    if exact is None and given.strip() != given:
        exact = store.get(given.strip())
    if exact is not None:
        return IdLookup(given, (exact,))
    start = given.strip().lower()
    if len(start) < MIN_PREFIX:
        return IdLookup(given, (), too_short=True)
    matches = tuple(i for i in store.incidents(include_resolved=True) if i.id.startswith(start))
    return IdLookup(given, matches)
