"""A total deadline for every call to DataHub over the SDK's ``requests`` session.

requests' and urllib3's timeouts bound each socket operation, not the call: a server that
sends its headers and then one byte a second, each inside the read timeout, keeps a call
(and the scan, and ``mlcopilot doctor``) alive for as long as it likes, and urllib3 sleeps
whatever ``Retry-After`` a server asks between retries. Here every call made inside
:func:`within` has a deadline, and everything it does keeps it:

- each connect (the TLS handshake included), each send and each read of the answer, headers
  and body, waits at most the time that is left (:class:`_Connection`, :class:`_Response`),
  so the call ends by its deadline however the server paces its bytes;
- a retry's wait (backoff or ``Retry-After``) that would end past the deadline is not waited:
  the call fails at once with :class:`DeadlinePassed` (:class:`_Retry`).

Name resolution (``getaddrinfo``) has no timeout in the standard library: it is the one step
the deadline does not bound (as in the sinks' HTTP stack, :mod:`mlcopilot.notify.sinks.http`,
which this module mirrors for ``requests``). It all works on the calling thread (no watchdog
thread, no signals): the deadline is a context variable, so a call made on another thread
(the catalog's workers) has its own. Through a SOCKS proxy only the per-operation timeouts
apply.

:func:`bound_session` installs it on a session (the SDK builds its own); :func:`within` sets
the deadline around one call.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.poolmanager import PoolManager
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

_DEADLINE: ContextVar[float | None] = ContextVar("mlcopilot_datahub_deadline", default=None)
"""The ``time.monotonic()`` by which the call in progress on this thread must be over."""


class DeadlinePassed(TimeoutError):
    """The call's deadline passed: before a socket operation, or a retry's wait would pass it.

    Attributes:
        status: The HTTP status of the answer a retry was to follow (None: no answer).
        wait: The wait before that retry, in seconds (None: no retry was waiting).
    """

    def __init__(self, message: str, *, status: int | None = None, wait: float | None = None):
        super().__init__(message)
        self.status = status
        self.wait = wait


@contextmanager
def within(seconds: float, *, until: float | None = None) -> Iterator[float]:
    """Everything inside (on this thread) ends within ``seconds``, and by ``until`` if given.

    A deadline already set (an enclosing call) is never extended. Yields the deadline.
    """
    deadline = time.monotonic() + seconds
    for outer in (until, _DEADLINE.get()):
        if outer is not None:
            deadline = min(deadline, outer)
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def expired() -> bool:
    """Whether the deadline of the call in progress (if any) has passed."""
    deadline = _DEADLINE.get()
    return deadline is not None and time.monotonic() >= deadline


def left(timeout: object) -> float | None:
    """``timeout`` (seconds, or None/urllib3's default: none) shortened to what is left.

    Raises:
        DeadlinePassed: nothing is left.
    """
    limit = float(timeout) if isinstance(timeout, int | float) else None
    deadline = _DEADLINE.get()
    if deadline is None:
        return limit
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DeadlinePassed("the call's total deadline passed")
    return remaining if limit is None else min(limit, remaining)


def bound_session(session: requests.Session) -> None:
    """Make every adapter of ``session`` keep the deadline of :func:`within`.

    Each ``requests`` adapter is replaced by a :class:`DeadlineAdapter` with the same pool
    sizes, socket options (the SDK's TCP keepalive) and retry policy, its waits bounded.
    """
    for prefix, adapter in list(session.adapters.items()):
        if isinstance(adapter, HTTPAdapter) and not isinstance(adapter, DeadlineAdapter):
            session.mount(prefix, DeadlineAdapter.like(adapter))


class _Retry(Retry):
    """urllib3's retry policy, whose waits never outlast the call's deadline."""

    @classmethod
    def like(cls, retry: Retry) -> _Retry:
        """The same policy as ``retry`` (the SDK's: statuses, methods, backoff, counts)."""
        return cls(
            total=retry.total,
            connect=retry.connect,
            read=retry.read,
            redirect=retry.redirect,
            status=retry.status,
            other=retry.other,
            allowed_methods=retry.allowed_methods,
            status_forcelist=retry.status_forcelist,
            backoff_factor=retry.backoff_factor,
            backoff_max=retry.backoff_max,
            raise_on_redirect=retry.raise_on_redirect,
            raise_on_status=retry.raise_on_status,
            respect_retry_after_header=retry.respect_retry_after_header,
            backoff_jitter=retry.backoff_jitter,
        )

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        """Wait as urllib3 would, unless that wait would end past the deadline."""
        wait = None
        if self.respect_retry_after_header and response is not None:
            wait = self.get_retry_after(response)
        if not wait:
            wait = self.get_backoff_time()
        left(None)  # the deadline may have passed already (what made this attempt fail)
        deadline = _DEADLINE.get()
        if deadline is not None and time.monotonic() + wait >= deadline:
            raise DeadlinePassed(
                f"the next retry ({wait:g} s later) would be past the call's total deadline",
                status=response.status if response is not None else None,
                wait=wait,
            )
        super().sleep(response)


class _Reader(io.RawIOBase):
    """A response's socket reader whose every read waits at most the time that is left."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, timeout: float | None) -> None:
        super().__init__()
        self._raw = raw
        self._sock = sock
        self._timeout = timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._sock.settimeout(left(self._timeout))
        return self._raw.readinto(buffer)

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


class _Response(http.client.HTTPResponse):
    """http.client's response (headers and body), read within the call's deadline."""

    def __init__(
        self,
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(sock, debuglevel, method, url)
        # Nothing is read yet: the buffered file is swapped for one over the same socket
        # reader, each of whose reads is bounded. detach(): the old one must not close it.
        raw = self.fp.detach()
        assert isinstance(raw, io.RawIOBase)
        self.fp = io.BufferedReader(_Reader(raw, sock, sock.gettimeout()))


class _Bounded(HTTPConnection):
    """A connection whose connect, sends and reads keep the call's deadline."""

    response_class = _Response

    def _new_conn(self) -> socket.socket:
        timeout = self.timeout
        # The connect (and, on HTTPS, the TLS handshake: the same socket timeout bounds it).
        self.timeout = left(timeout)
        try:
            return super()._new_conn()
        finally:
            self.timeout = timeout

    def send(self, data: Any) -> None:
        if self.sock is not None:
            self.sock.settimeout(left(self.timeout))
        super().send(data)


class _Connection(_Bounded):
    """Plain HTTP, within the deadline."""


class _TLSConnection(_Bounded, HTTPSConnection):
    """HTTPS, within the deadline."""


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


_POOLS: Mapping[str, type[HTTPConnectionPool]] = {"http": _Pool, "https": _TLSPool}


class DeadlineAdapter(HTTPAdapter):
    """requests' adapter over connections and retries that keep the call's deadline."""

    def __init__(
        self,
        *,
        retries: Retry,
        pool_connections: int,
        pool_maxsize: int,
        socket_options: list[Any] | None = None,
    ) -> None:
        self._socket_options = socket_options
        super().__init__(
            pool_connections=pool_connections,
            pool_maxsize=pool_maxsize,
            max_retries=_Retry.like(retries),
        )

    @classmethod
    def like(cls, adapter: HTTPAdapter) -> DeadlineAdapter:
        """An adapter configured as ``adapter`` (pools, socket options, retries)."""
        options = adapter.poolmanager.connection_pool_kw.get("socket_options")
        return cls(
            retries=adapter.max_retries,
            pool_connections=adapter._pool_connections,
            pool_maxsize=adapter._pool_maxsize,
            socket_options=list(options) if options else None,
        )

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        """The pool manager, whose pools' connections keep the deadline."""
        if self._socket_options:
            pool_kwargs["socket_options"] = self._socket_options
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        """The manager for an HTTP(S) proxy, its pools as the direct ones (not SOCKS)."""
        if self._socket_options:
            proxy_kwargs.setdefault("socket_options", self._socket_options)
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # a SOCKS manager has connections of its own
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager


__all__ = ["DeadlineAdapter", "DeadlinePassed", "bound_session", "expired", "left", "within"]
