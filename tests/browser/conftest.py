"""One headless Chromium for the browser tests; they skip, saying why, where there is none."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.browser import Chromium, chromium, find_chromium, why_no_chromium


@pytest.fixture(scope="session")
def browser() -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        pytest.skip(why_no_chromium())
    with chromium(executable) as launched:
        yield launched
