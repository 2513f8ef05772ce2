"""Before a SQLite state database is opened: is it there, and can it be mlcopilot's?

SQLite would silently treat a missing file as a new database (and create it) and a
zero-length one as an empty database: either way every incident would open again as new, and
a mistyped path would look like a clean estate. These checks run first, so only commands
that record a scan create a file, and an existing file is used only when it is a SQLite
database; whether it holds mlcopilot's tables is checked once it is open (``sql._migrate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sqlalchemy.engine import URL

from mlcopilot.errors import MissingStore, StoreError

SQLITE_HEADER: Final = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

WHERE_FROM: Final = "check --state-url, MLCOPILOT_STATE_URL or MLCOPILOT_HOME"
"""Where the path of the state database comes from, for messages."""


def sqlite_file(url: URL) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL; None for another backend or an in-memory database."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database in ("", ":memory:") or str(url.query.get("uri", "")).lower() == "true":
        return None  # in memory, or a SQLite URI the caller spelled out: theirs to check
    return Path(database).expanduser()


def check_sqlite_file(path: Path, shown: str, *, create: bool) -> bool:
    """Refuse what cannot be a state database at ``path``; True when it is to be created.

    Args:
        path: The SQLite file the URL names.
        shown: The URL as messages show it.
        create: The command records scans, so a missing file may be created (its folder
            must exist).

    Raises:
        MissingStore: The file (or its folder) does not exist and ``create`` is False.
        StoreError: The path is a folder, cannot be read, or is not a SQLite database.
    """
    if not path.exists():
        folder = path.parent
        missing = "" if folder.is_dir() else f" (the folder {folder} does not exist either)"
        if not create:
            raise MissingStore(
                f"no state database at {path}{missing}: nothing has been recorded there; "
                f"run `mlcopilot scan` first, or {WHERE_FROM}"
            )
        if missing:
            raise StoreError(
                f"cannot create state database {shown}: the folder {folder} does not exist; "
                f"create it, or {WHERE_FROM}"
            )
        return True
    if path.is_dir():
        raise StoreError(f"state database {shown} is a folder, not a file; {WHERE_FROM}")
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(
            f"cannot read state database {shown}: {exc.strerror}; check its permissions"
        ) from exc
    # Zero bytes: checked once the file is open and locked (sql._migrate): where hard links are
    # refused, a concurrent first scan may be creating it in place right now.
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"state database {shown} is not a SQLite database (it does not start with "
            "SQLite's header): move it away, or point mlcopilot at the right file"
        )
    return False


def read_only_url(url: URL, path: Path) -> URL:
    """``url`` opening ``path`` read-only (SQLite's ``mode=ro``): it is never written or created."""
    query = {**url.query, "mode": "ro", "uri": "true"}
    return URL.create("sqlite", database=path.resolve().as_uri(), query=query)


def empty_store_message(shown: str, path: Path | None) -> str:
    """Why a state database that holds no tables at all is refused rather than set up afresh."""
    size = ""
    if path is not None:
        try:
            size = f" ({path.stat().st_size} bytes)"
        except OSError:
            size = ""
    return (
        f"state database {shown} is empty{size}: it holds no mlcopilot state, and using it "
        "would start the history afresh (every incident would open again as new); if it was "
        "truncated, restore it from a backup, otherwise delete it and run again"
    )
