"""The sinks' one HTTP stack: httpx, with a total deadline per call and checked addresses.

GitHub's client (githubkit) and Slack's calls (:mod:`~mlcopilot.notify.sinks.slack`) both go
through :class:`DeadlineTransport`, and both turn a call that got no answer into a
:class:`~mlcopilot.incidents.payload.DeliveryError` with :func:`failed`.

httpx's timeouts bound each socket operation, not the call: a server that sends its headers
and then one byte just inside the read timeout keeps a call (and the outbox row's lease, and
the scan) alive for as long as it likes. :class:`DeadlineTransport` gives every request a
deadline and shortens each connect, TLS handshake, write and read to the time that is left,
so a call ends by its deadline however the server paces its bytes, headers included. Name
resolution (``getaddrinfo``) has no timeout in the standard library: it is the one step the
deadline does not bound. It works on the calling thread (no watchdog thread, no signals),
through httpcore's network-backend hook, under httpx's own transport (its request and response
conversion and its httpcore-to-httpx error mapping).

The same hook checks where a connection goes: the host is resolved once, every address it
resolves to must be admitted by the :class:`~mlcopilot.notify.sinks.urls.AddressPolicy`
(public, or named in ``notify.allowed_hosts``), and the socket connects to the very address
checked (:func:`connect`), so a name that DNS points inside, even after the configuration was
checked, is refused with :class:`RefusedAddress`, the one error for a refusal, and nothing is
sent.

Through a proxy (``HTTPS_PROXY``…) the connection goes to the proxy, which the operator
configured: its address is not checked against the allowlist (a corporate proxy usually is
internal), and the API's name is resolved by the proxy, not here, so only the check of the
configured URL (:func:`~mlcopilot.notify.sinks.urls.check_url`) applies to it; egress rules
belong to the proxy then. ``NO_PROXY`` hosts are connected to directly, and checked. httpx
reads those variables itself only when it builds its own transport, hence
:func:`_environment_proxy`.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import random
import selectors
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpcore
import httpx

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import DeliveryError
from mlcopilot.notify.sinks.urls import AddressPolicy
from mlcopilot.redact import redact

_DEADLINE: ContextVar[float | None] = ContextVar("mlcopilot_http_deadline", default=None)
"""The monotonic time by which the request in progress on this thread must be over."""
Resolver = Callable[..., list[tuple[Any, ...]]]
MAX_RETRIES = 2
"""How many times one call waits out a 429 before the wait goes back to the relay."""


class PostingSettings(Protocol):
    """What a :class:`Poster` needs of a sink's settings."""

    @property
    def timeout_s(self) -> float:
        """The whole of one call (connect, send, the complete answer), not each read."""
        ...

    @property
    def max_rate_limit_wait_s(self) -> float:
        """The longest ``Retry-After`` waited out inside one call."""
        ...

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """``notify.allowed_hosts``."""
        ...

    @property
    def allow_local(self) -> bool:
        """Tests against local fakes only."""
        ...


class RefusedAddress(httpx.ConnectError):
    """A name resolved to an address the allowlist does not admit (no connection was made).

    The one error for a refusal, as the sinks' HTTP client raises it: a connect that failed.
    """

    def __init__(self, host: str, address: str) -> None:
        super().__init__(
            f"{host} resolves to {address}, an internal address: not allowed unless "
            "notify.allowed_hosts names the host or its network"
        )
        self.host = host
        self.address = address


def connect(
    host: str,
    port: int,
    *,
    timeout: float | None,
    policy: AddressPolicy,
    source_address: tuple[str, int] | None = None,
    resolve: Resolver = socket.getaddrinfo,
) -> socket.socket:
    """Resolve ``host``, refuse it if any address is not admitted, connect to a checked one.

    As :func:`socket.create_connection`, but the addresses are checked first (all of them: a
    name with one internal answer is not trusted for its others) and the socket connects to
    the very address that was checked, so a second lookup cannot swap it.

    Raises:
        RefusedAddress: an address the policy does not admit.
        OSError: no address could be connected to.
    """
    answers = resolve(host, port, 0, socket.SOCK_STREAM)
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if not policy.admits(host, address):
            raise RefusedAddress(host, str(address))
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in answers:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            if source_address is not None:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last or OSError(f"{host}: no address to connect to")


def timeouts(total_s: float) -> httpx.Timeout:
    """Each socket operation's limit for a call of ``total_s`` (a connect: 5 s at most)."""
    return httpx.Timeout(total_s, connect=min(5.0, total_s))


def failed(what: str, exc: BaseException, *, total_s: float, sent: bool) -> DeliveryError:
    """The error for a call that got no answer (``exc``, an httpx error), ``what`` first.

    A refused address is permanent (nothing was sent, and the same DNS answers the same next
    time); a timeout says the deadline; anything else names its type, redacted. ``sent``: the
    request may have reached the server (the next attempt reconciles).
    """
    if isinstance(exc, RefusedAddress):
        return DeliveryError(f"{what}: {exc}", permanent=True)
    if isinstance(exc, httpx.TimeoutException):
        return DeliveryError(
            f"{what}: no complete answer within {total_s:g} s (timed out)", sent=sent
        )
    return DeliveryError(f"{what}: {redact(type(exc).__name__ + ': ' + str(exc))}", sent=sent)


def _verifying_context() -> ssl.SSLContext:
    """Httpx's verifying context, made once per ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``.

    Making one reads and parses the whole CA bundle (25 ms of CPU here), and a process makes
    many transports: one a sink and destination, and the watcher's scanner builds the sinks for
    every scan it runs. (When its relay lanes also built theirs every pass, making the context
    once took the Slack lane's CPU at 10 events a second from 0.26 to 0.15:
    ``benchmarks/watch.py``, session 23.) One context serves every connection of the process
    (httpcore sets the same ALPN on it for each); a CA bundle replaced on disk is read by the
    next process.
    """
    return _context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _context_for(_cert_file: str | None, _cert_dir: str | None) -> ssl.SSLContext:
    # Keyed by the two variables httpx reads from the environment to make it.
    return httpx.create_ssl_context()


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport, every request over within ``total_s`` seconds, to checked addresses.

    Args:
        total_s: The whole call's budget: connect, send, headers and body.
        base_url: The one origin this transport serves; the standard proxy environment
            variables (``HTTPS_PROXY``, ``NO_PROXY``…) are honoured for it.
        policy: Which resolved addresses a direct connection may reach (default: public
            ones only).
        resolve: Name resolution (``socket.getaddrinfo``; tests inject their own).
    """

    def __init__(
        self,
        total_s: float,
        *,
        base_url: str,
        policy: AddressPolicy | None = None,
        resolve: Resolver = socket.getaddrinfo,
    ) -> None:
        context = _verifying_context()
        super().__init__(verify=context)
        self._total_s = total_s
        proxy = _environment_proxy(base_url)
        backend = _Backend(
            policy or AddressPolicy(), resolve, proxy=_origin(proxy) if proxy else None
        )
        # httpx builds its pool without a network-backend parameter: the same pool, on ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=context,
            proxy=httpcore.Proxy(proxy) if proxy else None,
            network_backend=backend,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; an httpx timeout once its deadline has passed, body included."""
        deadline = time.monotonic() + self._total_s
        with _within(deadline):
            response = super().handle_request(request)
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _Body(response.stream, deadline)
        return response


class _Body(httpx.SyncByteStream):
    """The response body, read under the request's deadline (httpx reads it afterwards)."""

    def __init__(self, stream: httpx.SyncByteStream, deadline: float) -> None:
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
        self._stream.close()


@contextmanager
def _within(deadline: float) -> Iterator[None]:
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` shortened to what is left of the deadline; ``error`` once nothing is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the call's total deadline passed")
    return left if timeout is None else min(timeout, left)


@contextmanager
def _mapped(timeout: type[httpcore.TimeoutException], other: type[Exception]) -> Iterator[None]:
    """A socket's errors as httpcore's (which httpx maps to its own)."""
    try:
        yield
    except TimeoutError as exc:  # socket.timeout
        raise timeout(str(exc) or "timed out") from exc
    except OSError as exc:  # ssl.SSLError included
        raise other(str(exc)) from exc


class _Socket(httpcore.NetworkStream):
    """A connected socket as httpcore's stream: each operation within the call's deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            self._sock.settimeout(_left(timeout, httpcore.ReadTimeout))
            return self._sock.recv(max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            while buffer:
                self._sock.settimeout(_left(timeout, httpcore.WriteTimeout))
                buffer = buffer[self._sock.send(buffer) :]

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        try:
            with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
                self._sock.settimeout(_left(timeout, httpcore.ConnectTimeout))
                return _Socket(ssl_context.wrap_socket(self._sock, server_hostname=server_hostname))
        except BaseException:
            self.close()
            raise

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
            return self._sock  # what httpcore asks of it: selected_alpn_protocol()
        if info == "is_readable":  # a connection at rest with bytes to read was closed
            if self._sock.fileno() < 0:
                return True
            with selectors.DefaultSelector() as selector:
                selector.register(self._sock, selectors.EVENT_READ)
                return bool(selector.select(0))
        return None


class _Deadline(httpcore.NetworkStream):
    """httpcore's own stream to the operator's proxy (TLS inside TLS included), on the deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _Deadline(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """Connections within the deadline, each to a checked address (or to the proxy)."""

    def __init__(
        self, policy: AddressPolicy, resolve: Resolver, *, proxy: tuple[str, int] | None
    ) -> None:
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
            stream = httpcore.SyncBackend().connect_tcp(
                host, port, timeout, local_address, socket_options
            )
            return _Deadline(stream)
        source = None if local_address is None else (local_address, 0)
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            # RefusedAddress is httpx's ConnectError already: it goes through as it is.
            sock = connect(
                host,
                port,
                timeout=timeout,
                policy=self._policy,
                source_address=source,
                resolve=self._resolve,
            )
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as httpcore does
            except OSError:
                sock.close()
                raise
        return _Socket(sock)


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


class Poster:
    """POSTs to one endpoint; a 429 waited out on our clock while the waits stay short.

    A ``Retry-After`` (plus up to a second of jitter) is slept at most :data:`MAX_RETRIES`
    times per call, and only while the waits of that call stay within
    ``max_rate_limit_wait_s``; a longer one is answered as the 429 it is (the sink raises
    ``DeliveryError(retry_after=…)`` and the relay reschedules the row), so no wait here
    outlives the relay's lease on the row.
    """

    def __init__(
        self,
        settings: PostingSettings,
        url: str,
        *,
        clock: Clock,
        transport: httpx.BaseTransport | None,
    ) -> None:
        self._clock = clock
        self._settings = settings
        self._transport = transport or DeadlineTransport(
            settings.timeout_s,
            base_url=url,
            policy=AddressPolicy.of(settings.allowed_hosts, allow_loopback=settings.allow_local),
        )

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """The answer to a POST of ``body``; raises httpx's errors when there is none."""
        headers = {"User-Agent": "mlcopilot", **headers}
        limit = self._settings.max_rate_limit_wait_s
        retries, waited = 0, 0.0
        # A client per call, as githubkit makes them: no connection outlives the call.
        with httpx.Client(
            transport=self._transport,
            timeout=timeouts(self._settings.timeout_s),
            follow_redirects=False,
        ) as client:
            while True:
                response = client.post(url, content=body, headers=headers)
                wait = retry_after(response.headers)
                if (
                    response.status_code != 429
                    or retries == MAX_RETRIES
                    or waited + wait + 1 > limit
                ):
                    return response
                wait += random.random()
                retries, waited = retries + 1, waited + wait
                self._clock.sleep(wait)


def retry_after(headers: httpx.Headers) -> float:
    """``Retry-After`` in seconds (1 when absent or unreadable: a 429 still waits)."""
    try:
        return max(0.0, float(headers.get("retry-after", "1")))
    except ValueError:
        return 1.0
