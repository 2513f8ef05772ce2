"""A server on 127.0.0.1 that answers every request with headers, then one byte a second.

The server that keeps a per-read timeout from ever firing: each read gets its byte in time,
and the answer never ends. It is bounded: it listens on a port of its own (port 0), and stops
by itself after ``lifetime`` seconds (each connection too), so a client without a total
deadline hangs only that long, and a test that forgets it leaves nothing behind.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Drip:
    """The running server: its URL and what it saw."""

    url: str
    requests: list[bytes] = field(default_factory=list)
    """The request line and headers of each request received, in order."""


@contextmanager
def drip_server(
    *, interval: float = 1.0, lifetime: float = 60.0, headers_too: bool = False
) -> Iterator[Drip]:
    """Serve until the block ends or ``lifetime`` passes, whichever is first.

    Args:
        interval: Seconds between two bytes.
        lifetime: Seconds after which the server and every connection stop by themselves.
        headers_too: Drip the status line and headers as well, not only the body.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    drip = Drip(url=f"http://127.0.0.1:{port}")
    ends = time.monotonic() + lifetime
    stop = threading.Event()

    def answer(connection: socket.socket) -> None:
        with connection:
            connection.settimeout(0.5)
            request = b""
            try:
                while b"\r\n\r\n" not in request and time.monotonic() < ends:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    request += chunk
            except OSError:
                return
            drip.requests.append(request.split(b"\r\n\r\n", 1)[0])
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000\r\n\r\n"
            )
            body = b'{"data": ' + b" " * 999_990
            try:
                if not headers_too:
                    connection.sendall(head)
                    head = b""
                for byte in head + body:
                    if stop.wait(interval) or time.monotonic() >= ends:
                        return
                    connection.sendall(bytes([byte]))
            except OSError:  # the client gave up: what a total deadline does
                return

    def serve() -> None:
        workers: list[threading.Thread] = []
        while not stop.is_set() and time.monotonic() < ends:
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            worker = threading.Thread(target=answer, args=(connection,), daemon=True)
            worker.start()
            workers.append(worker)
        stop.set()
        for worker in workers:
            worker.join(timeout=2)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield drip
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
