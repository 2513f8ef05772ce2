"""The test relay in front of the stand-ins: a stand-in that hangs up leaves no socket open.

The MCP tests share one ``mcp-server-datahub`` behind :class:`~tests.catalog.mcp_backend.Relay`.
A stand-in stopped by a finished test can drop the relay's connection mid-answer; a socket left
unclosed then is a ``ResourceWarning`` in whichever test the garbage collector next runs in.
"""

from __future__ import annotations

import gc
import socket
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator

import pytest

from tests.catalog.mcp_backend import Relay


@pytest.fixture(
    params=[b"", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"],
    ids=["before-answering", "mid-answer"],
)
def hangs_up(request: pytest.FixtureRequest) -> Iterator[str]:
    """A server that reads a request and hangs up before answering, or halfway through."""
    answer: bytes = request.param
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    host, port = listener.getsockname()[:2]
    yield f"http://{host}:{port}"
    listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (closing alone does not)
    listener.close()
    thread.join(timeout=5)


def test_a_stand_in_that_hangs_up_is_a_502_and_leaves_no_socket_open(hangs_up: str) -> None:
    relay = Relay()
    relay.target = hangs_up
    try:
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(f"{relay.url}/api/graphql", data=b"{}", timeout=10)
        assert answered.value.code == 502
        assert b"relay:" in answered.value.read()
        answered.value.close()
    finally:
        relay.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
