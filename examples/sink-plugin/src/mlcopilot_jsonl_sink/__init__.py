"""``jsonl``: an mlcopilot sink shipped as its own package, through an entry point.

It appends one JSON line per notification event (a group opened, updated, reminded,
acknowledged, resolved) to the file that ``[sinks.jsonl] path`` names::

    {"idempotency_key": "jsonl:<group>:1:open:0", "event": "open", "group": "<group>",
     "incidents": ["<incident id>", ...], "models": ["urn:li:mlModel:...", ...]}

The pattern every sink plugin follows: **the sink is idempotent itself**. mlcopilot delivers
each event *at least once*: a row is committed with the scan, handed to ``deliver`` and marked
done afterwards, so a process killed between the two (or a timeout after the other side got
it) hands the same row to ``deliver`` again. Each row carries ``item.dedupe_key``, the event's
stable idempotency key, the same in every attempt and every process; the sink must make a
second delivery of one key a no-op. Here the file is the record: before appending, the sink
reads the keys already in the file (under a lock, so two mlcopilot processes cannot both
append one key) and skips a key it finds. An HTTP sink sends the key instead (an
``Idempotency-Key`` header, a ``dedup_key``) or first looks for what an earlier attempt made.
"""

from __future__ import annotations

import fcntl  # POSIX: the lock that makes "look for the key, then append" one step
import json
import os
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import StringConstraints, ValidationError
from pydantic_core import ErrorDetails

from mlcopilot.config import PluginConfig
from mlcopilot.errors import ConfigError
from mlcopilot.incidents.payload import (
    Action,
    Delivered,
    DeliveryError,
    OutboxItem,
    PayloadError,
    SinkRef,
    decode_notification,
)
from mlcopilot.notify.sinks.registry import SinkContext, SinkPlugin

__all__ = ["JsonlConfig", "JsonlSink"]


class JsonlConfig(PluginConfig):
    """The ``[sinks.jsonl]`` section (mlcopilot keeps ``enabled`` for itself).

    :class:`~mlcopilot.config.PluginConfig` is frozen and refuses unknown keys, so a misspelt
    key is an error naming it rather than a setting silently ignored.
    """

    path: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    """The file events are appended to: created when absent, its directory must exist. A
    relative path is relative to the directory mlcopilot runs in; ``~`` is expanded."""


class JsonlSink:
    """Appends one JSON line per notification event to a file, each event once."""

    # The contract (mlcopilot.notify.sinks.registry): the name is the entry-point name (and
    # the [sinks.NAME] section's); events are the transitions this sink gets rows for.
    name: ClassVar[str] = "jsonl"
    events: ClassVar[frozenset[Action]] = frozenset(
        {"open", "update", "reminder", "acknowledge", "resolve"}
    )

    def __init__(self, config: JsonlConfig) -> None:
        self._path = Path(config.path).expanduser()
        # What the file held the last time it was read: the keys, up to which byte, and which
        # file it was (a file replaced or truncated, e.g. rotated, is read again from 0).
        self._keys: set[str] = set()
        self._read_up_to = 0
        self._file: tuple[int, int] | None = None

    @classmethod
    def from_context(cls, context: SinkContext) -> JsonlSink:
        """The sink ``[sinks.jsonl]`` configures (ConfigError naming a key that is wrong).

        Routing destinations (``jsonl:<something>``) are not used: every row goes to the file.
        """
        try:
            config = JsonlConfig.model_validate(dict(context.section))
        except ValidationError as exc:
            problems = "; ".join(_problem(error) for error in exc.errors())
            raise ConfigError(problems) from None
        return cls(config)

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Append the row's line unless its key is in the file already.

        ``ref`` (where the group lives in this sink) is for sinks that edit what an earlier
        row made, a thread or an issue; a file is only appended to.

        Raises:
            DeliveryError: ``permanent`` when retrying cannot help (an unreadable row, a file
                that cannot be opened): the row goes dead until ``mlcopilot outbox retry``.
                Otherwise ``sent``, as part of the line may be written: the retry reconciles.
        """
        try:
            line = _line(item)
        except PayloadError as exc:  # a row this version of mlcopilot cannot read
            raise DeliveryError(f"jsonl: outbox row {item.id}: {exc}", permanent=True) from None
        try:
            written = self._append_once(item.dedupe_key, line)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError) as exc:
            raise DeliveryError(
                f"jsonl: cannot open {self._path}: {exc.strerror}", permanent=True
            ) from None
        except OSError as exc:  # a full disk, an I/O error: maybe half written, try again
            raise DeliveryError(f"jsonl: writing {self._path}: {exc}", sent=True) from None
        if not written:
            # An earlier attempt wrote it, then the process died before mlcopilot marked the
            # row done: the warning appears in the scan's summary, the line is not repeated.
            return Delivered(warning=f"jsonl: {item.dedupe_key} was already in {self._path}")
        return Delivered()

    def _append_once(self, key: str, line: bytes) -> bool:
        """Append ``line`` unless ``key`` is in the file; whether it was appended."""
        fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed
            torn = self._catch_up(fd)
            if key in self._keys:
                return False
            # A line cut short (its writer died mid-write) is ended first, so ours is whole.
            data = b"\n" + line if torn else line
            if os.write(fd, data) != len(data):  # rare (a full disk): the retry ends it whole
                raise OSError(f"wrote part of the line ({len(data)} bytes)")
            # On disk before mlcopilot marks the row done: a crash then cannot lose it.
            os.fsync(fd)
            self._keys.add(key)
            return True
        finally:
            os.close(fd)

    def _catch_up(self, fd: int) -> bool:
        """Add the keys of the lines written since the last read; whether the file ends torn."""
        stat = os.fstat(fd)
        if self._file != (stat.st_dev, stat.st_ino) or stat.st_size < self._read_up_to:
            self._keys.clear()
            self._read_up_to = 0
            self._file = (stat.st_dev, stat.st_ino)
        new = os.pread(fd, stat.st_size - self._read_up_to, self._read_up_to)
        whole = new.rfind(b"\n") + 1  # complete lines only: a torn tail holds no event
        for raw in new[:whole].splitlines():
            key = _key_of(raw)
            if key is not None:
                self._keys.add(key)
        self._read_up_to += whole
        return whole < len(new)


def _line(item: OutboxItem) -> bytes:
    """The row's JSON line, built from the row alone: every attempt writes the same bytes."""
    group = decode_notification(item.payload).group
    event = {
        "idempotency_key": item.dedupe_key,
        "event": item.action,
        "group": group.key,
        "incidents": [member.incident_id for member in group.members],
        "models": list(group.models),
    }
    return json.dumps(event).encode("utf-8") + b"\n"


def _key_of(raw: bytes) -> str | None:
    """The idempotency key of one line of the file (None for a line that is not an event)."""
    try:
        event: Any = json.loads(raw)
    except ValueError:
        return None
    key = event.get("idempotency_key") if isinstance(event, dict) else None
    return key if isinstance(key, str) else None


def _problem(error: ErrorDetails) -> str:
    """One pydantic error as ``sinks.jsonl.<key>: what is wrong``."""
    key = ".".join(["sinks", JsonlSink.name, *(str(part) for part in error["loc"])])
    if error["type"] == "missing":
        return f"{key}: required (the file to append events to)"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key"
    return f"{key}: {error['msg']}"


# mypy checks the class against the plugin contract here, not first in a user's scan.
_CONTRACT: type[SinkPlugin] = JsonlSink
