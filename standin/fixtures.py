"""pytest fixtures for the DataHub stand-in (registered from tests/conftest.py)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from standin.sdl import ENV_VAR, expected_sdl_location, sdl_path
from standin.server import StandIn


class StandInFactory(Protocol):
    """The ``standin_factory`` fixture: ``make(mcps, **kwargs)`` -> a started stand-in."""

    def __call__(self, mcps: Iterable[Any], **kwargs: Any) -> StandIn: ...


def require_sdl() -> None:
    """Skip the calling test when DataHub's GraphQL SDL is not on this machine."""
    if sdl_path() is None:
        pytest.skip(f"DataHub GraphQL SDL not found at {expected_sdl_location()} (set {ENV_VAR})")


@pytest.fixture
def standin_factory(tmp_path: Path) -> Iterator[StandInFactory]:
    """``make(mcps) -> StandIn``: a started stand-in serving those MCPs; all stop at teardown."""
    require_sdl()
    started: list[StandIn] = []

    def make(mcps: Iterable[Any], **kwargs: Any) -> StandIn:
        server = StandIn.from_mcps(mcps, tmp_path / f"standin-{len(started)}", **kwargs)
        started.append(server.start())
        return server

    yield make
    for server in started:
        server.close()
        if server.errors:  # resolver crashes GMS would hide behind "An unknown error occurred."
            warnings.warn(
                "DataHub stand-in resolver errors:\n" + "\n".join(server.errors), stacklevel=1
            )
