"""Headless Debian Chromium for the browser tests: open a local file, see every request it makes.

The browser is Debian's ``chromium`` (``make test`` installs it as root when missing), driven
by Playwright with ``executable_path`` (Playwright never downloads a browser here). A page is
opened as a person opens the report, from a ``file://`` URL, and the network is shut twice:

- every request the page makes goes through ``route("**/*")``: the page's own file is let
  through, anything else (another file, any http/https/ws host) is recorded and aborted, and
  WebSockets are recorded and closed, so a test can fail on ``traffic.foreign``;
- Chromium resolves no host name at all (``--host-resolver-rules``), so even a request the
  routing missed could not leave the machine.

:func:`decode_png` reads the screenshots (8-bit RGB/RGBA, as Chromium writes them) without an
imaging library, so a test can check the colour of a pixel.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Request,
    Route,
    WebSocketRoute,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

CHROMIUM_VARIABLE = "MLCOPILOT_CHROMIUM"
"""Names the Chromium binary to use instead of the one on PATH."""
_NAMES = ("chromium", "chromium-browser")
VIEWPORT = (1280, 900)
"""The default window: wide enough for the demo's graph beside nothing else."""


def find_chromium() -> str | None:
    """The Chromium binary: ``$MLCOPILOT_CHROMIUM``, else ``chromium`` on PATH, else None."""
    named = os.environ.get(CHROMIUM_VARIABLE)
    if named:
        return named if Path(named).is_file() else None
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def why_no_chromium() -> str:
    """The skip reason when :func:`find_chromium` finds nothing."""
    named = os.environ.get(CHROMIUM_VARIABLE)
    if named:
        return f"{CHROMIUM_VARIABLE}={named}: no such file"
    return (
        "Debian's chromium is not installed (make test installs it with apt-get when run as "
        f"root; or set {CHROMIUM_VARIABLE} to a Chromium binary)"
    )


@dataclass
class Traffic:
    """What a page asked the network for, as the browser saw it."""

    page_url: str
    requests: list[str] = field(default_factory=list)
    """Every request routed, the page's own first."""
    seen: list[str] = field(default_factory=list)
    """Every request the browser reported (``request`` events): a second view of the same."""
    websockets: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    """Uncaught exceptions in the page's script."""

    @property
    def foreign(self) -> list[str]:
        """Every request other than the page's own file, and every WebSocket."""
        other = [u for u in (*self.requests, *self.seen) if u != self.page_url]
        return sorted(set(other)) + self.websockets


@dataclass
class OpenedPage:
    """A page with the file loaded, and what it asked the network for."""

    page: Page
    traffic: Traffic

    def screenshot(self, *, full_page: bool = True) -> bytes:
        """A PNG of the page (the whole page unless ``full_page`` is False)."""
        return self.page.screenshot(full_page=full_page, type="png", animations="disabled")


class Chromium:
    """One headless Chromium; :meth:`open` gives an isolated page (its own context) per call."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser

    @contextmanager
    def open(
        self,
        path: Path,
        *,
        media: Literal["screen", "print"] = "screen",
        viewport: tuple[int, int] = VIEWPORT,
        init_script: str | None = None,
    ) -> Iterator[OpenedPage]:
        """Load ``path`` from its ``file://`` URL with every other request refused and recorded.

        ``init_script`` runs in the page before any of its own (to watch what the page does).
        """
        url = path.resolve().as_uri()
        traffic = Traffic(page_url=url)
        width, height = viewport
        context = self.browser.new_context(
            viewport={"width": width, "height": height},
            service_workers="block",
            color_scheme="light",
            reduced_motion="reduce",
        )
        try:

            def route(route: Route) -> None:
                traffic.requests.append(route.request.url)
                if route.request.url == url:
                    route.continue_()
                else:
                    route.abort("blockedbyclient")

            def websocket(ws: WebSocketRoute) -> None:
                traffic.websockets.append(ws.url)
                ws.close()

            def seen(request: Request) -> None:
                traffic.seen.append(request.url)

            def console(message: ConsoleMessage) -> None:
                if message.type == "error":
                    traffic.console_errors.append(message.text)

            context.route("**/*", route)
            context.route_web_socket("**", websocket)
            context.on("request", seen)
            if init_script is not None:
                context.add_init_script(init_script)
            page = context.new_page()
            page.on("console", console)
            page.on("pageerror", lambda error: traffic.page_errors.append(str(error)))
            page.emulate_media(media=media)
            page.goto(url, wait_until="load")
            yield OpenedPage(page, traffic)
        finally:
            context.close()


@contextmanager
def chromium(executable: str) -> Iterator[Chromium]:
    """Headless ``executable`` for the duration (``--no-sandbox`` when running as root)."""
    args = [
        # No host name resolves: nothing leaves the machine even past the routing.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--metrics-recording-only",
        "--disable-domain-reliability",
        "--font-render-hinting=none",
        "--force-color-profile=srgb",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to sandbox as root
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=args)
        try:
            yield Chromium(browser)
        finally:
            with suppress(PlaywrightError):  # already gone: nothing to close
                browser.close()


# --- screenshots


@dataclass(frozen=True, slots=True)
class Image:
    """A decoded screenshot: ``width`` × ``height`` RGBA pixels, row by row."""

    width: int
    height: int
    rgba: bytes

    def pixel(self, x: int, y: int) -> tuple[int, int, int, int]:
        """The (r, g, b, a) at column ``x``, row ``y``."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise IndexError(f"({x}, {y}) is outside {self.width}x{self.height}")
        at = (y * self.width + x) * 4
        r, g, b, a = self.rgba[at : at + 4]
        return r, g, b, a


_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {2: 3, 6: 4}  # colour type -> samples per pixel (RGB, RGBA)


def decode_png(data: bytes) -> Image:
    """Decode an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are).

    Raises:
        ValueError: not a PNG, or a kind this small decoder does not read.
    """
    if not data.startswith(_SIGNATURE):
        raise ValueError("not a PNG")
    at, header, chunks = len(_SIGNATURE), b"", []
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
    channels = _CHANNELS[colour]
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        rows.append(line)
        previous = line
    if channels == 4:
        return Image(width, height, b"".join(rows))
    rgba = bytearray()
    for line in rows:
        for x in range(0, stride, 3):
            rgba += line[x : x + 3] + b"\xff"
    return Image(width, height, bytes(rgba))


def _unfilter(kind: int, line: bytearray, previous: bytearray, bpp: int) -> None:
    # PNG's five per-row filters (RFC 2083 §6), undone in place.
    if kind == 0:
        return
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            corner = previous[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        else:
            raise ValueError(f"bad PNG filter type {kind}")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def parse_css_colour(text: str) -> tuple[int, int, int]:
    """``#rgb``, ``#rrggbb`` or ``rgb(r, g, b)`` (as ``getComputedStyle`` gives) as a triple.

    Raises:
        ValueError: any other spelling.
    """
    value = text.strip().lower()
    if value.startswith("#") and len(value) in (4, 7):
        digits = value[1:]
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
    if value.startswith(("rgb(", "rgba(")) and value.endswith(")"):
        parts = value[value.index("(") + 1 : -1].replace("/", " ").replace(",", " ").split()
        r, g, b = (round(float(p)) for p in parts[:3])
        return r, g, b
    raise ValueError(f"{text!r} is not a colour this test reads (#rgb, #rrggbb, rgb())")


# --- the demo's report


DEMO_NOW = "2026-11-22T10:00:00Z"
"""The clock of the report's scan: an hour after the demo's last scan, so ages are fixed."""
DEMO_MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"


@dataclass(frozen=True, slots=True)
class DemoReport:
    """The demo's HTML reports, and the same scan's JSON report to check them against."""

    home: Path
    html: Path
    """``scan --format html``: the scan's picture."""
    json: Path
    history: Path
    """``mlcopilot report``: the same picture with the incidents' whole history."""


def build_demo_report(folder: Path) -> DemoReport:
    """Run ``mlcopilot demo`` in ``folder``, a dry-run scan writing HTML and JSON, and ``report``.

    The demo leaves its catalog and its incidents (opened, one resolved); the scan and the
    report show them at :data:`DEMO_NOW` without changing them. All run as a user would run
    them, in a clean environment (no credentials, nothing sent).

    Raises:
        RuntimeError: a command failed (its stderr in the message).
    """
    home = folder / "demo"
    html, report, history = folder / "scan.html", folder / "scan.json", folder / "report.html"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "MLCOPILOT_HOME": str(home),
        "DATAHUB_TELEMETRY_ENABLED": "false",
        "COLUMNS": "120",
    }
    scan = ["scan", "--dry-run", "--now", DEMO_NOW, "--quiet"]
    scan += ["--format", "html", "--output", str(html), "--format", "json", "--output", str(report)]
    whole = ["report", "--now", DEMO_NOW, "--output", str(history)]
    for args in (["demo", "--home", str(home)], scan, whole):
        done = subprocess.run(
            [sys.executable, "-m", "mlcopilot", *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=env,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mlcopilot {args[0]} failed ({done.returncode}): {done.stderr}")
    return DemoReport(home=home, html=html, json=report, history=history)
