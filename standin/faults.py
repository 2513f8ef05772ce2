"""Request recording, fault injection and GMS's rate limiting for the stand-in."""

from __future__ import annotations

import math
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


RATE_LIMIT_EXCLUDED = ("/health", "/health/live", "/actuator/prometheus")
"""``rateLimits.excludedPaths`` (GMS also excludes ``/openapi/v1/rate-limits/**``)."""


@dataclass
class RateLimit:
    """A GMS token bucket (``datahub.gms.rateLimits.scoped``, Bucket4j), on the stand-in's clock.

    ``capacity`` requests, refilled continuously at ``refill_tokens`` per ``period_s``. With
    ``resolver`` set it is a heavy-resolver bucket (``scoped.heavyResolvers.<resolver>``: only
    GraphQL requests with that top-level field take from it), else the actor's bucket
    (``scoped.actor``: every request but the excluded paths). A request that finds it empty is
    answered as GMS answers: HTTP 429, ``{"error": "Rate limit exceeded"}``, and the headers
    ``Retry-After`` (seconds: the wait for a token, at least ``min_retry_after_s``; GMS adds up
    to 10% jitter, the stand-in none), ``X-DataHub-RateLimit-Rule``, ``-Type: endpoint`` and
    ``-Source`` (``graphql-gate`` for GraphQL, ``servlet-filter`` otherwise).
    """

    capacity: float
    refill_tokens: float
    period_s: float = 60.0
    resolver: str | None = None
    min_retry_after_s: int = 60  # rateLimits.minRetryAfterSeconds
    denied: int = 0
    tokens: float = field(init=False)
    _updated: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.tokens = self.capacity

    @property
    def rule(self) -> str:
        return f"scoped:op:{self.resolver}" if self.resolver else "scoped:actor"

    def applies(self, path: str, root_fields: tuple[str, ...]) -> bool:
        if any(path == p or path.startswith(p + "/") for p in RATE_LIMIT_EXCLUDED):
            return False
        return self.resolver is None or self.resolver in root_fields

    def take(self, now: float) -> int | None:
        """Take a token: None when there was one, else the ``Retry-After`` in seconds."""
        with self._lock:
            if self._updated is not None:
                rate = self.refill_tokens / self.period_s
                self.tokens = min(self.capacity, self.tokens + (now - self._updated) * rate)
            self._updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return None
            self.denied += 1
            wait = (1 - self.tokens) * self.period_s / max(self.refill_tokens, 1e-9)
            return max(self.min_retry_after_s, math.ceil(wait))

    def headers(self, retry_after: int, *, graphql: bool) -> dict[str, str]:
        return {
            "X-DataHub-RateLimit-Source": "graphql-gate" if graphql else "servlet-filter",
            "X-DataHub-RateLimit-Rule": self.rule,
            "X-DataHub-RateLimit-Type": "endpoint",
            "Retry-After": str(retry_after),
        }


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
