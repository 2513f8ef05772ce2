"""The browser harness itself: it sees every kind of request a page can make, and reads pixels.

These hold the guard the report's tests rely on: were it blind to one kind of reference, the
report's "no request" assertion could pass while the report fetched something.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.browser import Chromium, decode_png

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

LEAKY = """<!doctype html><html><head>
<link rel="stylesheet" href="https://cdn.example/style.css">
<style>@import "https://fonts.example/font.css"; body { background: url(bg.png); }</style>
</head><body>
<img src="https://img.example/pixel.png">
<img src="local.png">
<script src="https://cdn.example/lib.js"></script>
<script>
fetch("https://telemetry.example/t").catch(() => {});
new WebSocket("wss://live.example/socket");
navigator.sendBeacon("https://beacon.example/b", "x");
</script>
</body></html>
"""

CLEAN = """<!doctype html><html><head><style>body { margin: 0 }
#a { width: 40px; height: 30px; background: #c0392b }
#b { width: 40px; height: 30px; background: rgb(39, 174, 96) }</style></head>
<body><div id="a"></div><div id="b"></div>
<a href="https://datahub.example/x">a link</a></body></html>
"""


def test_every_reference_a_page_fetches_is_seen_and_refused(
    browser: Chromium, tmp_path: Path
) -> None:
    page_file = tmp_path / "leaky.html"
    page_file.write_text(LEAKY, encoding="utf-8")
    with browser.open(page_file) as opened:
        opened.page.wait_for_function("document.readyState === 'complete'")
        opened.page.wait_for_timeout(300)  # the script's fetch, socket and beacon go out after load
        foreign = opened.traffic.foreign
    folder = tmp_path.as_uri()
    for url in (
        "https://cdn.example/style.css",
        "https://fonts.example/font.css",
        f"{folder}/bg.png",
        "https://img.example/pixel.png",
        f"{folder}/local.png",
        "https://cdn.example/lib.js",
        "https://telemetry.example/t",
        "https://beacon.example/b",
        "wss://live.example/socket",
    ):
        assert url in foreign, url
    assert opened.traffic.requests[0] == page_file.as_uri()


def test_a_page_with_only_links_makes_no_request_and_its_pixels_read_back(
    browser: Chromium, tmp_path: Path
) -> None:
    page_file = tmp_path / "clean.html"
    page_file.write_text(CLEAN, encoding="utf-8")
    with browser.open(page_file, viewport=(320, 200)) as opened:
        image = decode_png(opened.screenshot(full_page=False))
        traffic = opened.traffic
    assert traffic.foreign == []
    assert traffic.requests == [page_file.as_uri()]
    assert (image.width, image.height) == (320, 200)
    assert image.pixel(20, 15) == (0xC0, 0x39, 0x2B, 255)
    assert image.pixel(20, 45) == (39, 174, 96, 255)
    assert image.pixel(200, 15) == (255, 255, 255, 255)
