"""Opening a database that cannot be used: one line naming the URL (no password) and a fix."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mlcopilot.errors import StoreError
from mlcopilot.model import Baseline, Schema
from mlcopilot.store import MissingStore, default_state_url, open_store

T0 = datetime(2025, 3, 1, tzinfo=UTC)


def _refused(url: str) -> str:
    with pytest.raises(StoreError) as caught:
        open_store(url)
    message = str(caught.value)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


def test_default_state_url_is_a_sqlite_file_in_home_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "deep" / ".mlcopilot"
    url = default_state_url(home)
    assert url == f"sqlite:///{home / 'state.db'}"
    assert not (tmp_path / "deep").exists()
    home.mkdir(parents=True)
    with open_store(url) as store:
        assert store.incidents() == []
    assert (home / "state.db").is_file()


def test_a_file_that_is_not_a_sqlite_database(tmp_path: Path) -> None:
    bogus = tmp_path / "state.db"
    bogus.write_bytes(b"this is not SQLite at all\n" * 200)
    message = _refused(f"sqlite:///{bogus}")
    assert str(bogus) in message
    assert "not a SQLite database" in message
    assert "move it away" in message
    assert bogus.read_bytes().startswith(b"this is not SQLite")  # left alone


def test_a_sqlite_database_of_someone_else_is_left_alone(tmp_path: Path) -> None:
    foreign = tmp_path / "catalog.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE metadata_aspect (urn TEXT)")
    message = _refused(f"sqlite:///{foreign}")
    assert "not mlcopilot's (metadata_aspect)" in message
    with sqlite3.connect(foreign) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == {"metadata_aspect"}


def test_a_missing_directory(tmp_path: Path) -> None:
    message = _refused(f"sqlite:///{tmp_path / 'nope' / 'state.db'}")
    assert f"the folder {tmp_path / 'nope'} does not exist" in message
    assert not (tmp_path / "nope").exists()


def test_a_missing_file_is_not_created_when_only_reading(tmp_path: Path) -> None:
    typo = tmp_path / "typo-state.db"
    with pytest.raises(MissingStore) as caught:
        open_store(f"sqlite:///{typo}", create=False)
    assert f"no state database at {typo}" in str(caught.value)
    assert "run `mlcopilot scan` first" in str(caught.value)
    with pytest.raises(MissingStore):
        open_store(f"sqlite:///{typo}", read_only=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("create", [True, False])
def test_an_empty_existing_file_is_refused_not_set_up(tmp_path: Path, create: bool) -> None:
    empty = tmp_path / "state.db"
    empty.touch()
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{empty}", create=create)
    message = str(caught.value)
    assert "is empty (0 bytes)" in message
    assert "restore it from a backup" in message
    assert empty.stat().st_size == 0  # left as it was


def test_a_store_whose_revision_table_is_gone_is_called_damaged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    open_store(url).close()
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("DROP TABLE alembic_version")
    message = _refused(url)
    assert "holds mlcopilot's tables but no schema revision" in message
    assert "not mlcopilot's" not in message


def test_a_read_only_open_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    open_store(url).close()
    before = (tmp_path / "state.db").read_bytes()
    with open_store(url, read_only=True) as store:
        assert store.incidents() == []
        assert store.last_scan_at() is None
        with pytest.raises(StoreError, match="readonly"):
            store.save_baselines(
                [Baseline("urn:li:mlModel:m", "urn:li:dataset:d", Schema(()), "first_scan", T0)]
            )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]
    assert (tmp_path / "state.db").read_bytes() == before


def test_reopening_needs_no_write_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    open_store(url).close()
    writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process is in the middle of a write
        with open_store(url) as store:
            assert store.incidents() == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_an_unreachable_postgres_hides_the_password() -> None:
    message = _refused("postgresql+psycopg://scanner:s3cr3t-pw@127.0.0.1:1/state")
    assert "s3cr3t-pw" not in message
    assert "postgresql+psycopg://scanner:***@127.0.0.1:1/state" in message
    assert "check that PostgreSQL is running" in message


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_plain_postgres_urls_mean_psycopg_3(scheme: str) -> None:
    message = _refused(f"{scheme}://scanner:pw@127.0.0.1:1/state")
    assert "postgresql+psycopg://scanner:***@127.0.0.1:1/state" in message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://root:topsecret@db/state", "mysql is not supported"),
        ("not a url", "is not a database URL"),
        ("https://user:topsecret@example.com/x", "is not supported"),
    ],
)
def test_urls_that_are_not_supported(url: str, expected: str) -> None:
    message = _refused(url)
    assert expected in message
    assert "topsecret" not in message


def test_a_write_while_another_process_writes_fails_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}?timeout=0.2"
    open_store(url).close()  # the store exists; then another process starts writing
    writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    with open_store(url) as store:
        try:
            writer.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError) as caught:
                store.save_baselines(
                    [Baseline("urn:li:mlModel:m", "urn:li:dataset:d", Schema(()), "first_scan", T0)]
                )
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        message = str(caught.value)
        assert "\n" not in message
        assert message.endswith(
            "saving baselines failed: database is locked; "
            "another process is writing to it: try again"
        )
        assert store.baselines("urn:li:mlModel:m") == []


def test_only_a_recording_open_sets_up_a_new_database(store_url: str) -> None:
    # An empty PostgreSQL schema, like a SQLite file that is not there: nothing recorded yet.
    for create, read_only in ((False, False), (True, True)):
        with pytest.raises(MissingStore, match="run `mlcopilot scan` first"):
            open_store(store_url, create=create, read_only=read_only)
    open_store(store_url).close()  # a scan creates it
    for create, read_only in ((False, False), (True, True)):
        with open_store(store_url, create=create, read_only=read_only) as store:
            assert store.incidents() == []
            assert store.last_scan_at() is None
