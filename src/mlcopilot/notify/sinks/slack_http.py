"""The HTTP under slack_sdk's clients: a total deadline per call, checked addresses, no redirects.

slack_sdk calls urllib with one ``timeout``, which urllib applies to each socket operation: a
server that sends its headers and then a byte every few seconds never trips it, and a call
can last forever. :func:`open_url` gives the whole call — connect, send, status line,
headers, body — one deadline: before every read the socket's timeout is set to what is left
of it (never more than the per-read timeout), so the call ends by the deadline whatever the
server does. Its connections resolve the host and connect only to addresses the allowlist
admits (:func:`mlcopilot.notify.sinks.urls.connect`), and 3xx answers are errors, never
followed (urllib would re-send a POST's target as a GET to any ``Location``).

Name resolution itself (``getaddrinfo``) has no timeout in the standard library; it is the
one step the deadline does not bound.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
import urllib.request
from functools import partial
from typing import Any
from urllib.request import HTTPRedirectHandler, OpenerDirector, Request

from mlcopilot.notify.sinks.urls import AddressPolicy, connect


class DeadlineExceeded(TimeoutError):
    """The call did not complete (the whole answer read) within its deadline."""


class _NoRedirect(HTTPRedirectHandler):
    """Refuse redirects: a 3xx becomes an error instead of a request to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each given only what is left of the call's deadline."""

    def __init__(self, sock: socket.socket, deadline: float, per_read: float, total: float):
        super().__init__()
        self._raw = sock.makefile("rb", buffering=0)  # counted by the socket, as http.client's
        self._sock = sock
        self._deadline = deadline
        self._per_read = per_read
        self._total = total

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"no complete answer within {self._total:g} s")
        self._sock.settimeout(min(left, self._per_read))
        try:
            return self._raw.readinto(buffer)
        except TimeoutError:
            if self._deadline - time.monotonic() <= 0:
                raise DeadlineExceeded(f"no complete answer within {self._total:g} s") from None
            raise

    def close(self) -> None:
        self._raw.close()
        super().close()


def _response_class(
    deadline: float, per_read: float, total: float
) -> type[http.client.HTTPResponse]:
    class _Response(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            super().__init__(sock, *args, **kwargs)
            self.fp.close()  # the plain reader http.client made: replaced before any read
            self.fp = io.BufferedReader(_DeadlineReader(sock, deadline, per_read, total))

    return _Response


class _Checked:
    """What both connection classes add: a checked connect and the deadline on every read."""

    _deadline: float
    _total: float
    _policy: AddressPolicy

    def _guard(self, deadline: float, total: float, policy: AddressPolicy) -> None:
        self._deadline, self._total, self._policy = deadline, total, policy
        timeout = getattr(self, "timeout", None)  # HTTPConnection's: each socket operation
        per_read = timeout if isinstance(timeout, int | float) else total
        self.response_class = _response_class(deadline, per_read, total)
        self._create_connection = self._connect

    def _connect(
        self, address: tuple[str, int], timeout: Any = None, source_address: Any = None
    ) -> socket.socket:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"no connection within {self._total:g} s")
        limit = min(left, timeout) if isinstance(timeout, int | float) else left
        host, port = address
        return connect(
            host, port, timeout=limit, policy=self._policy, source_address=source_address
        )


class _HTTPConnection(_Checked, http.client.HTTPConnection):
    def __init__(
        self, host: str, *, deadline: float, total: float, policy: AddressPolicy, **kwargs: Any
    ) -> None:
        super().__init__(host, **kwargs)
        self._guard(deadline, total, policy)


class _HTTPSConnection(_Checked, http.client.HTTPSConnection):
    def __init__(
        self, host: str, *, deadline: float, total: float, policy: AddressPolicy, **kwargs: Any
    ) -> None:
        super().__init__(host, **kwargs)
        self._guard(deadline, total, policy)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connection: Any) -> None:
        super().__init__()
        self._connection = connection

    def http_open(self, req: Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connection: Any, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._connection = connection
        self._ssl = context

    def https_open(self, req: Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=self._ssl)


def opener(
    *, total: float, policy: AddressPolicy, context: ssl.SSLContext | None
) -> OpenerDirector:
    """An opener for one call: its deadline starts now and covers the whole answer."""
    deadline = time.monotonic() + total
    return urllib.request.build_opener(
        _NoRedirect(),
        _HTTPHandler(partial(_HTTPConnection, deadline=deadline, total=total, policy=policy)),
        _HTTPSHandler(
            partial(_HTTPSConnection, deadline=deadline, total=total, policy=policy), context
        ),
    )


def open_url(
    req: Request,
    *,
    total: float,
    per_read: float,
    policy: AddressPolicy,
    context: ssl.SSLContext | None,
) -> tuple[int, Any, bytes]:
    """Send ``req`` and read the whole answer within ``total`` seconds: status, headers, body.

    Raises:
        DeadlineExceeded: the answer was not complete in time.
        urllib.error.HTTPError: a status of 300 or more (redirects included, never followed).
        OSError: no connection (a :class:`~mlcopilot.notify.sinks.urls.RefusedAddress` when
            the address is not allowed).
    """
    with opener(total=total, policy=policy, context=context).open(req, timeout=per_read) as resp:
        return resp.status, resp.headers, resp.read()
