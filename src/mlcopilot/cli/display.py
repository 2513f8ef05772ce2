"""How this invocation prints: the display choices of the global options, and the consoles.

The one piece of state the command line's two halves share: the global options
(``mlcopilot --full-names ...``, read in :mod:`mlcopilot.cli._app`) set it and the renderers
(:mod:`mlcopilot.cli.render`) read it, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console

UNWRAPPED = 10_000
"""The width of a console that is not a terminal: wide enough that no line is ever wrapped.

Off a terminal (CI logs, pipes, files) a wrapped line is a broken one: ``grep error:`` finds
half a message and a copied urn or id is cut. Nothing printed is padded to the full width
(no panel, rule or expanded table), so the width costs nothing.
"""


@dataclass(slots=True)
class Display:
    """What the global options chose about how names are shown."""

    full_names: bool = False
    """``--full-names``: tables show full urns, never cut, instead of short names."""


DISPLAY = Display()
"""This invocation's choices (one process runs one command)."""


def console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr): rich on a terminal, plain and never wrapped off one.

    On a terminal, output fits its width. Off one, rich's default would hard-wrap at 80
    columns (or ``$COLUMNS``); this console keeps every line whole and prints no colour or
    cursor codes.
    """
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=UNWRAPPED)
