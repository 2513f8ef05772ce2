"""Read and validate a load's records on a second core while the first one writes them.

Parsing, validating and serialising a record costs about as much as writing it into SQLite, so
for a large load :func:`prepared` forks a reader process that does the former and hands the
results over a pipe in batches, in file order; the loading process only writes. For small loads
(and when asked) everything runs in the calling process, through the very same functions.

The reader never touches the catalog. It stops on its own when the loading process dies (its
next hand-over finds the pipe closed), and the loading process kills it when it stops early.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from mlcopilot.errors import InputError

PARALLEL_FROM_BYTES = 4 * 1024 * 1024
"""Loads of at least this many bytes read in a second process (below, forking is not worth it)."""
_BATCH = 500

Read = Callable[[Path, Callable[[int], None] | None], Iterator[tuple[int, object]]]
"""Records of one file, numbered from 1; told the bytes read now and then."""
Prepare = Callable[[object], Any]
"""Validate one record into something picklable; raise ``bad_record`` for an invalid one."""


def prepared(
    files: Sequence[Path],
    read: Read,
    prepare: Prepare,
    bad_record: type[Exception],
    *,
    parallel: bool,
) -> Iterator[tuple[str, int, int, Any]]:
    """``(kind, file index, record number, payload)`` for every record of ``files``, in order.

    Kinds: ``"item"`` (payload: what ``prepare`` returned), ``"bad"`` (payload: the message of
    the ``bad_record`` it raised; nothing follows), ``"read"`` (payload: bytes read so far in
    that file; number 0). Raises what ``read`` raises (an :class:`InputError`) in order too.
    """
    if not parallel:
        yield from _prepare_all(files, read, prepare, bad_record)
        return
    receiver, sender = multiprocessing.get_context("fork").Pipe(duplex=False)
    reader = multiprocessing.get_context("fork").Process(
        target=_reader, args=(receiver, sender, files, read, prepare, bad_record), daemon=True
    )
    reader.start()
    sender.close()
    try:
        while True:
            try:
                batch = receiver.recv()
            except EOFError:
                raise RuntimeError("the metadata reader process died") from None
            if batch is None:
                break
            for event in batch:
                if event[0] == "input-error":
                    raise InputError(event[3])
                if event[0] == "crash":
                    raise RuntimeError(f"the metadata reader process failed:\n{event[3]}")
                yield event
    finally:
        receiver.close()
        if reader.is_alive():
            reader.kill()  # stopped early (an error, a signal): its work is of no use now
        reader.join()


def _prepare_all(
    files: Sequence[Path], read: Read, prepare: Prepare, bad_record: type[Exception]
) -> Iterator[tuple[str, int, int, Any]]:
    for index, path in enumerate(files):
        read_so_far: list[int] = []
        for number, record in read(path, read_so_far.append):
            if read_so_far:
                yield ("read", index, 0, read_so_far.pop())
                read_so_far.clear()
            try:
                item = prepare(record)
            except bad_record as exc:
                yield ("bad", index, number, str(exc))
                return
            yield ("item", index, number, item)


def _reader(
    receiver: Connection,
    sender: Connection,
    files: Sequence[Path],
    read: Read,
    prepare: Prepare,
    bad_record: type[Exception],
) -> None:
    # Only the loading process may hold the reading end: with it closed, the loading process
    # dying closes the pipe, and the next send here fails instead of blocking for ever.
    receiver.close()
    # The loading process decides about signals: a Ctrl-C or SIGTERM there kills this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    batch: list[tuple[str, int, int, Any]] = []
    try:
        try:
            for event in _prepare_all(files, read, prepare, bad_record):
                batch.append(event)
                if len(batch) >= _BATCH:
                    sender.send(batch)
                    batch = []
        except InputError as exc:
            batch.append(("input-error", 0, 0, str(exc)))
        except Exception:  # a bug: hand the traceback over rather than die silently
            batch.append(("crash", 0, 0, traceback.format_exc()))
        sender.send(batch)
        sender.send(None)
    except (BrokenPipeError, EOFError, OSError):
        pass  # the loading process is gone: nobody to hand anything to
    finally:
        sender.close()
        os._exit(0)  # no interpreter teardown: the forked copy of the catalog stays untouched
