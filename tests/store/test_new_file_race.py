"""Processes that open one new SQLite state file at the same moment all get the same database.

A watcher starts its scanner and its relay lanes together, each opening the state database;
on a new file one of them creates it. None may find the file half made (it would refuse it as
a truncated database), and none may leave anything beside it (the creators' temporary files).
CI once saw the half-made file refused (a relay lane's open between its creator's first
connection and its write lock, on a loaded machine). The processes opening at once did not
reproduce that millisecond's window with the code before the fix (three runs); the last test
makes it happen, a second opener run while the first is connected to the file it is making,
and fails with that code as CI did.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.store import open_store, sql

OPENERS = 8
ROUNDS = 15
STEP_S = 0.0007
"""Each opener starts this much after the one before it."""
NOW = datetime(2026, 12, 6, tzinfo=UTC)
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"


def _open_at_once(
    url: str, barrier: Barrier, delay: float, results: multiprocessing.Queue[str]
) -> None:
    barrier.wait()
    time.sleep(delay)  # spread over the creator's few milliseconds, not all before them
    try:
        with open_store(url) as store:
            results.put("ok" if store.incidents() == [] else "not empty")
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_openers_of_a_new_file_at_once_all_use_the_one_made(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        url = f"sqlite:///{folder / 'state.db'}"
        barrier = context.Barrier(OPENERS)
        results: multiprocessing.Queue[str] = context.Queue()
        openers = [
            context.Process(target=_open_at_once, args=(url, barrier, n * STEP_S, results))
            for n in range(OPENERS)
        ]
        for opener in openers:
            opener.start()
        said = [results.get(timeout=60) for _ in openers]
        for opener in openers:
            opener.join(60)
        assert said == ["ok"] * OPENERS, (round_, said)
        assert [p.name for p in folder.iterdir()] == ["state.db"], round_


def test_where_hard_links_are_refused_the_file_is_made_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")  # some network filesystems

    monkeypatch.setattr(os, "link", refused)
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        assert store.incidents() == []
    assert [p.name for p in tmp_path.iterdir()] == ["state.db"]


def test_an_opener_arriving_while_the_file_is_being_made_finds_none_half_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window CI hit, made to happen: a second opener comes (and writes) while the first
    has connected to its new file and not yet set it up. It finds nothing at the path, makes
    and links its own; the first finds the path taken and uses that one. (Before the fix the
    second found the first's empty file and refused it as truncated.)"""
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    current = sql._current
    paused: list[bool] = []

    def connected_not_yet_set_up(conn: Any, revisions: Any, shown: str) -> Any:
        if not paused:  # the first opener, connected to the file it is making
            paused.append(True)
            with open_store(url) as other:
                other.request_rescans([MODEL], reason="the other opener", now=NOW)
        return current(conn, revisions, shown)

    monkeypatch.setattr(sql, "_current", connected_not_yet_set_up)
    with open_store(url) as store:
        assert [r.reason for r in store.rescans()] == ["the other opener"]
    assert paused == [True]
    assert [p.name for p in tmp_path.iterdir()] == ["state.db"]
