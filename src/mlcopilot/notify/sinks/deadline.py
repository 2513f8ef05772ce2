"""A total deadline for each HTTP call: from connect to the response's last byte.

httpx's timeouts bound each socket operation, not the call: a server that sends its headers
and then one byte just inside the read timeout keeps a call (and the outbox row's lease, and
the scan) alive for as long as it likes. :class:`DeadlineTransport` gives every request a
deadline and shortens each connect, TLS handshake, write and read to the time that is left,
so a call ends by its deadline however the server paces its bytes, headers included.

It works on the calling thread (no watchdog thread, no signals), through httpcore's
network-backend hook; httpcore's errors become httpx's, as with httpx's own transport.

The same hook checks where a connection goes: the host is resolved once, every address it
resolves to must be admitted by the :class:`~mlcopilot.notify.sinks.urls.AddressPolicy`
(public, or named in ``notify.allowed_hosts``), and the socket connects to the very address
checked (:func:`mlcopilot.notify.sinks.urls.connect`, Slack's clients' helper too), so a
name that DNS points inside, even after the configuration was checked, is refused with
:class:`AddressRefused` and nothing is sent.

Through a proxy (``HTTPS_PROXY``…) the connection goes to the proxy, which the operator
configured: its address is not checked against the allowlist (a corporate proxy usually is
internal), and the API's name is resolved by the proxy, not here, so only the check of the
configured URL (:func:`~mlcopilot.notify.sinks.urls.check_url`) applies to it; egress rules
belong to the proxy then. ``NO_PROXY`` hosts are connected to directly, and checked.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

# httpcore's own stream over a connected socket (TLS, TLS through a TLS proxy): a socket from
# urls.connect is wrapped as httpcore's SyncBackend wraps the one it makes itself.
from httpcore._backends.sync import SyncStream

from mlcopilot.notify.sinks.urls import AddressPolicy, RefusedAddress, Resolver, connect

_DEADLINE: ContextVar[float | None] = ContextVar("mlcopilot_http_deadline", default=None)
"""The monotonic time by which the request in progress on this thread must be over."""


class AddressRefused(httpx.ConnectError):
    """The API's name resolved to an address the allowlist does not admit; nothing was sent."""


class _Refused(httpcore.ConnectError):
    """httpcore's side of :class:`AddressRefused` (raised inside its connection pool)."""


# Most specific first: the first match wins.
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (_Refused, AddressRefused),
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


class DeadlineTransport(httpx.BaseTransport):
    """An httpx transport whose every request is over within ``total_s`` seconds.

    Args:
        total_s: The whole call's budget: connect, send, headers and body.
        connect_s: The most a connect may take (within ``total_s``).
        base_url: The one origin this transport serves; the standard proxy environment
            variables (``HTTPS_PROXY``, ``NO_PROXY``…) are honoured for it, as httpx does
            when it builds its own transport.
        policy: Which resolved addresses a direct connection may reach (default: public
            ones only).
        resolve: Name resolution (``socket.getaddrinfo``; tests inject their own).
    """

    def __init__(
        self,
        total_s: float,
        *,
        connect_s: float | None = None,
        base_url: str,
        policy: AddressPolicy | None = None,
        resolve: Resolver = socket.getaddrinfo,
    ) -> None:
        self._total_s = total_s
        self._connect_s = connect_s
        proxy = _environment_proxy(base_url)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            proxy=httpcore.Proxy(proxy) if proxy else None,
            network_backend=_DeadlineBackend(
                policy or AddressPolicy(), resolve, proxy=_origin(proxy) if proxy else None
            ),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; raise an httpx timeout once its deadline has passed."""
        deadline = time.monotonic() + self._total_s
        timeouts = dict(request.extensions.get("timeout") or {})
        if self._connect_s is not None:
            timeouts["connect"] = min(timeouts.get("connect") or self._connect_s, self._connect_s)
        assert isinstance(request.stream, Iterable)  # a sync client's body
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions={**request.extensions, "timeout": timeouts},
        )
        with _within(deadline):
            response = self._pool.handle_request(core)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream, deadline),
            extensions=response.extensions,
        )

    def close(self) -> None:
        """Close the pooled connections (the transport may still be used afterwards)."""
        self._pool.close()


class _Body(httpx.SyncByteStream):
    """The response body, read under the request's deadline.

    httpx reads it after :meth:`DeadlineTransport.handle_request` has returned.
    """

    def __init__(self, stream: Iterable[bytes], deadline: float) -> None:
        self._stream = stream
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._stream)
        while True:
            # Set per chunk, not around the loop: a generator must not leave the deadline set
            # in its caller's context while it is suspended.
            with _within(self._deadline):
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


@contextmanager
def _within(deadline: float) -> Iterator[None]:
    token = _DEADLINE.set(deadline)
    try:
        yield
    except httpcore.TimeoutException as exc:
        if time.monotonic() >= deadline:
            raise httpx.ReadTimeout("the call's total deadline passed") from exc
        raise _mapped(exc) from exc
    except Exception as exc:
        mapped = _mapped(exc)
        if mapped is exc:
            raise
        raise mapped from exc
    finally:
        _DEADLINE.reset(token)


def _mapped(exc: Exception) -> Exception:
    for core, ours in _ERRORS:
        if isinstance(exc, core):
            return ours(str(exc))
    return exc


def _left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` shortened to what is left of the deadline; ``error`` once nothing is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the call's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sockets, each connect within the deadline and to a checked address."""

    def __init__(
        self, policy: AddressPolicy, resolve: Resolver, *, proxy: tuple[str, int] | None
    ) -> None:
        self._inner = httpcore.SyncBackend()
        self._policy = policy
        self._resolve = resolve
        self._proxy = proxy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        if self._proxy is not None and (host.lower(), port) == self._proxy:
            # The operator's proxy (see the module's docstring): connected to as configured.
            return _DeadlineStream(
                self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
            )
        source = None if local_address is None else (local_address, 0)
        try:
            sock = connect(
                host,
                port,
                timeout=timeout,
                policy=self._policy,
                source_address=source,
                resolve=self._resolve,
            )
        except RefusedAddress as exc:
            raise _Refused(str(exc)) from exc
        except TimeoutError as exc:  # socket.timeout
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as httpcore does
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return _DeadlineStream(SyncStream(sock))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _origin(proxy: str) -> tuple[str, int]:
    parts = urlsplit(proxy)
    default = 443 if parts.scheme == "https" else 80
    return (parts.hostname or "").lower(), parts.port or default


def _environment_proxy(base_url: str) -> str | None:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if not host or urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")
