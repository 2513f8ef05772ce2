"""Serve one benchmark catalog through the DataHub stand-in, in a process of its own.

The stand-in runs apart from the product being measured, so the two do not share a GIL or
a heap: the product's wall time, CPU time and peak RSS are its own, and the stand-in's
handler time (which it measures per request) is reported next to them, never mixed in.

``python -m benchmarks.serve LITE_FILE --latency 0.02`` prints one JSON line,
``{"url": ..., "control": ...}``, then serves until stdin closes. The control server answers
``GET /stats`` (requests since the last clear: count, bytes, handler and injected seconds, by
operation; ``?before=EPOCH_SECONDS`` for those done by then) and ``POST /clear``.

``--processes N`` serves from N processes listening on one port (``SO_REUSEPORT``: the kernel
spreads the connections over them by address), as GMS serves requests on all its cores where
one Python process holds one: each holds its own index of the file, so they are read-only (a
write is answered 500 and counted as an error), for benchmarks that only read, such as the
shared rescan's. The control server then merges their figures.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from standin import RecordedRequest, StandIn
from standin.faults import Recorder


@dataclass
class StampedRecorder(Recorder):
    """The stand-in's recorder, plus when each request was recorded (its handler done).

    The measuring process asks for the requests up to a moment of its own (``/stats?before=``)
    and so splits them by phase without asking the server anything during the timed span.
    """

    stamps: list[float] = field(default_factory=list)

    def add(self, request: RecordedRequest) -> None:
        """Record ``request`` and the moment."""
        with self._lock:
            self.requests.append(request)
            self.stamps.append(time.time())

    def clear(self) -> None:
        """Forget every request."""
        with self._lock:
            self.requests.clear()
            self.stamps.clear()

    def before(self, moment: float) -> tuple[list[RecordedRequest], list[float]]:
        """The requests recorded at or before ``moment`` (``time.time()``), and when."""
        with self._lock:
            pairs = [(r, t) for r, t in zip(self.requests, self.stamps, strict=True) if t <= moment]
        return [r for r, _ in pairs], [t for _, t in pairs]


def operation(request: RecordedRequest) -> str:
    """The GraphQL operation, else the method and the path with any urn segment as ``*``."""
    if request.operation:
        return request.operation
    segments = ["*" if "%3A" in s or s.startswith("urn:") else s for s in request.path.split("/")]
    return f"{request.method} {'/'.join(segments)}"


def busy(requests: list[RecordedRequest], ends: list[float]) -> float:
    """Wall-clock seconds during which at least one handler was working.

    Requests overlap (a client keeps several in flight), so the sum of handler times can
    exceed the wall time; the union of their intervals cannot. A handler's work is taken as
    the ``duration_s`` before it recorded the request (its injected delay comes earlier,
    while it had parsed the request but not yet answered).
    """
    return union(handler_spans(requests, ends))


def handler_spans(requests: list[RecordedRequest], ends: list[float]) -> list[list[float]]:
    """Each request's ``[start, end]`` of handler work (epoch seconds)."""
    return [[end - r.duration_s, end] for r, end in zip(requests, ends, strict=True)]


def union(spans: list[list[float]]) -> float:
    """The seconds covered by at least one of ``spans``."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def summarize(requests: list[RecordedRequest], ends: list[float] | None = None) -> dict[str, Any]:
    """What the benchmark reports about a list of recorded requests (and when they ended)."""
    by_operation: Counter[str] = Counter()
    handler_s: dict[str, float] = {}
    for request in requests:
        name = operation(request)
        by_operation[name] += 1
        handler_s[name] = handler_s.get(name, 0.0) + request.duration_s
    return {
        "requests": len(requests),
        "request_bytes": sum(r.body_bytes for r in requests),
        "response_bytes": sum(r.response_bytes for r in requests),
        "handler_s": sum(r.duration_s for r in requests),
        "handler_busy_s": busy(requests, ends) if ends is not None else None,
        "injected_s": sum(r.injected_delay_s for r in requests),
        "errors": sum(1 for r in requests if r.status >= 400),
        "by_operation": dict(sorted(by_operation.items())),
        "handler_s_by_operation": dict(sorted(handler_s.items())),
    }


class _Control(BaseHTTPRequestHandler):
    server_under_test: StandIn
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        if split.path != "/stats":
            self._reply(404, {"error": self.path})
            return
        query = parse_qs(split.query)
        before = query.get("before")
        recorder = self.server_under_test._recorder
        assert isinstance(recorder, StampedRecorder)
        requests, ends = recorder.before(float(before[0]) if before else math.inf)
        summary = summarize(requests, ends)
        if query.get("spans"):  # for the process merging several stand-ins' figures
            summary["spans"] = handler_spans(requests, ends)
        self._reply(200, summary)

    def do_POST(self) -> None:
        if self.path != "/clear":
            self._reply(404, {"error": self.path})
            return
        self.server_under_test.clear_requests()
        self._reply(200, {"cleared": True})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Merging(_Control):
    """The control server of a stand-in of several processes: asks each, merges."""

    children: list[str]

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        if split.path != "/stats":
            self._reply(404, {"error": self.path})
            return
        query = f"?{split.query}&spans=1" if split.query else "?spans=1"
        figures = []
        for control in self.children:
            with urllib.request.urlopen(f"{control}/stats{query}", timeout=30) as response:
                figures.append(json.load(response))
        self._reply(200, merge(figures))

    def do_POST(self) -> None:
        if self.path != "/clear":
            self._reply(404, {"error": self.path})
            return
        for control in self.children:
            request = urllib.request.Request(f"{control}/clear", method="POST", data=b"")
            urllib.request.urlopen(request, timeout=30).close()
        self._reply(200, {"cleared": True})


SUMMED = ("requests", "request_bytes", "response_bytes", "handler_s", "injected_s", "errors")


def merge(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary of several processes' figures (each with its ``spans``).

    Handler-busy seconds are those during which a handler of any of them was working.
    """
    merged: dict[str, Any] = {key: sum(f[key] for f in figures) for key in SUMMED}
    merged["handler_busy_s"] = union([span for f in figures for span in f["spans"]])
    for key in ("by_operation", "handler_s_by_operation"):
        total: Counter[str] = Counter()
        for f in figures:
            total.update(f[key])
        merged[key] = dict(sorted(total.items()))
    merged["requests_by_process"] = [f["requests"] for f in figures]
    return merged


def serve(lite: Path, latency: float, partial_lineage: bool, processes: int = 1) -> None:
    """Serve a copy of ``lite`` until stdin closes (writes never reach the cached catalog)."""
    workdir = Path(tempfile.mkdtemp(prefix="mlcopilot-bench-serve-"))
    try:
        copy = workdir / "catalog.db"
        shutil.copy(lite, copy)
        if processes == 1:
            _serve_one(copy, latency, partial_lineage)
        else:
            _serve_many(copy, latency, partial_lineage, processes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _serve_one(
    lite: Path, latency: float, partial_lineage: bool, listening: socket.socket | None = None
) -> None:
    # The copy is thrown away: an fsync per aspect written (Lite commits each one) would
    # make the stand-in's disk, not DataHub's API, what a write-back waits for.
    server = StandIn.from_lite(lite, durable=False)
    server._recorder = StampedRecorder()
    server.latency = latency
    server.backend.partial_lineage = partial_lineage
    if listening is not None:
        server.backend.read_only = "one of several processes serving the file"
    with server.start(listening):
        handler = type("Control", (_Control,), {"server_under_test": server})
        _control(handler, {"url": server.url})
    server.stop()


def _serve_many(lite: Path, latency: float, partial_lineage: bool, processes: int) -> None:
    # Holds the port (bound, never listening: no connection is handed to it) while the
    # processes start and listen on it. One socket shared by all instead spread connections
    # unevenly: in one rescan run one process took 342 of 354 requests.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as reserved:
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        reserved.bind(("127.0.0.1", 0))
        host, port = reserved.getsockname()[:2]
        command = [sys.executable, "-m", "benchmarks.serve", str(lite), "--latency", str(latency)]
        command += ["--port", str(port)]
        if partial_lineage:
            command.append("--partial-lineage")
        children: list[subprocess.Popen[str]] = []
        try:
            for _ in range(processes):  # started together, each reading the file
                children.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        cwd=Path(__file__).resolve().parent.parent,
                    )
                )
            controls = []
            for child in children:
                assert child.stdout is not None
                line = child.stdout.readline()  # once it listens
                if not line:
                    raise RuntimeError(f"a stand-in process did not start for {lite}")
                controls.append(json.loads(line)["control"])
            handler = type("Merging", (_Merging,), {"children": controls})
            _control(handler, {"url": f"http://{host!s}:{port}"})
        finally:
            for child in children:
                if child.stdin is not None:
                    child.stdin.close()
            for child in children:
                child.wait(timeout=30)
                if child.stdout is not None:
                    child.stdout.close()


def _control(handler: type[BaseHTTPRequestHandler], line: dict[str, Any]) -> None:
    """Run the control server, print ``line`` with its address, serve until stdin closes."""
    control = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, daemon=True).start()
    host, port = control.server_address[:2]
    print(json.dumps({**line, "control": f"http://{host!s}:{port}"}))
    sys.stdout.flush()
    sys.stdin.read()  # the parent closes our stdin to stop us
    control.shutdown()


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m benchmarks.serve LITE_FILE [--latency S] [--processes N]``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lite", type=Path)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument(
        "--partial-lineage",
        action="store_true",
        help="answer past GMS's relation cap with isPartial instead of an error",
    )
    parser.add_argument(
        "--processes", type=int, default=1, help="serve from this many processes (read-only)"
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)  # one of --processes
    args = parser.parse_args(argv)
    if args.port is not None:  # serves the parent's copy in place, on the port it holds
        listening = socket.create_server(("127.0.0.1", args.port), backlog=128, reuse_port=True)
        _serve_one(args.lite, args.latency, args.partial_lineage, listening)
    elif args.processes < 1:
        parser.error("--processes must be at least 1")
    else:
        serve(args.lite, args.latency, args.partial_lineage, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
