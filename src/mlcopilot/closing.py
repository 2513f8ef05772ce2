"""``with catalog:`` and ``with store:``: one context-manager protocol, closed on the way out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class ClosedOnExit(ABC):
    """A resource used as ``with resource:``; leaving the block calls :meth:`close`."""

    @abstractmethod
    def close(self) -> None:
        """Release what the resource holds; safe to call more than once."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
