"""Request recording and fault injection for the stand-in."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in saw it.

    ``query`` maps each query parameter to its values (``parse_qs``); ``operation`` is the
    GraphQL operationName, else the first root field; ``duration_s`` is the time spent in the
    handler, excluding injected latency and hangs (``injected_delay_s``).
    """

    method: str
    path: str
    query: dict[str, list[str]]
    operation: str | None
    status: int
    duration_s: float
    body_bytes: int
    response_bytes: int
    root_fields: tuple[str, ...] = ()
    injected_delay_s: float = 0.0
    fault: str | None = None  # the pattern of the fault applied, if any


@dataclass
class Fault:
    """A rule applied to matching requests; ``times=None`` means every time."""

    pattern: str
    latency: float = 0.0
    status: int | None = None
    hang: bool = False
    times: int | None = None
    body: str | None = None
    hook: Callable[[], None] | None = None
    """Run before the request is answered: e.g. someone else's write that lands just before
    this one (a race the test wants at an exact point)."""
    hits: int = 0

    def matches(self, keys: list[str]) -> bool:
        return any(fnmatchcase(key, self.pattern) for key in keys)


@dataclass
class Faults:
    """Injected faults, first match wins; a fault that has run out of ``times`` is dropped."""

    rules: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.rules.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def take(self, keys: list[str]) -> Fault | None:
        with self._lock:
            for fault in self.rules:
                if fault.matches(keys):
                    fault.hits += 1
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self.rules.remove(fault)
                    return fault
        return None


@dataclass
class Recorder:
    requests: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self.requests)
