"""Load DataHub metadata files (the file sink's JSON: MCPs and/or MCEs) into a Lite catalog.

Files are streamed (a line at a time when they hold one record a line, else by ``ijson``),
never read whole, and every record is validated against the SDK's schemas
(:mod:`mlcopilot.catalog.aspect_json`, the SDK's own classes when that is not sure) as it is
written, in file order, into one transaction: a bad record anywhere, an
interrupted process or a full disk leaves the catalog as it was, and the error names the file,
the record and what is wrong with it.

Change types: ``UPSERT`` writes; ``PATCH`` is applied to the aspect as stored at that point of
the load (:mod:`mlcopilot.catalog.patch`) and the result validated and written like an UPSERT;
``CREATE`` writes only an aspect that does not exist and ``CREATE_ENTITY`` only into an entity
that does not exist (GMS refuses the proposal otherwise; here it is a reported skip, so a file
can be reloaded). ``DELETE``, ``RESTATE`` and ``UPDATE`` are reported skips (see README).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import ijson  # type: ignore[import-untyped]  # no stubs; used for items() only
import msgspec
from avrogen.dict_wrapper import DictWrapper
from datahub.emitter.aspect import ASPECT_MAP, JSON_CONTENT_TYPE
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import mcps_from_mce
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.metadata.schema_classes import (
    ENTITY_TYPE_TO_ASPECT_NAMES,
    KEY_ASPECTS,
    MetadataChangeEventClass,
    SystemMetadataClass,
    _Aspect,
)
from datahub.metadata.urns import Urn as SdkUrn

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.aspect_json import NotFast, dumps, normalise
from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.lite_writer import LiteWriter, Outcome
from mlcopilot.catalog.load_stream import PARALLEL_FROM_BYTES, prepared
from mlcopilot.catalog.patch import PatchError, apply_patch
from mlcopilot.errors import CatalogError, InputError

_SNAPSHOT_TYPES = frozenset(
    s.name
    for s in MetadataChangeEventClass.RECORD_SCHEMA.fields_dict["proposedSnapshot"].type.schemas
)
_JSON_KINDS = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
_FIRST_CHAR_KINDS = {ord("{"): "an object", ord('"'): "a string", ord("t"): "a boolean"}
_FIRST_CHAR_KINDS |= {ord("f"): "a boolean", ord("n"): "null"}
_PATCH_CONTENT_TYPE = "application/json-patch+json"
_CHANGE_TYPES = frozenset(
    {"UPSERT", "CREATE", "CREATE_ENTITY", "PATCH", "DELETE", "RESTATE", "UPDATE"}
)
_SKIPPED_CHANGES = {
    "DELETE": "DELETE is not applied: it would erase the aspect's version history "
    "(soft-delete with a status UPSERT instead)",
    "RESTATE": "RESTATE only re-emits the stored aspect in GMS; nothing to do locally",
    "UPDATE": "UPDATE is not implemented by GMS either",
}
_EXACT_ERRORS_UP_TO = 64 * 1024 * 1024
"""Below this size a malformed file is re-read with ``json`` for its line and column."""
MAX_REPORTED_SKIPS = 10

Progress = Callable[[int, int], None]
"""Called with (bytes read, bytes in all files) as a load goes."""


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """What one load did."""

    files: int
    records: int
    """JSON records read (an MCE counts once however many aspects it carries)."""
    urns: int
    """Distinct entities the records touch."""
    aspects: int
    """Aspects applied (MCEs are split into one per aspect; skipped records not counted)."""
    new_versions: int
    """Aspect versions that did not exist before: new aspects and changed ones."""
    patches: int = 0
    """PATCH records applied."""
    skipped: int = 0
    """Records not applied, each for a reason in :attr:`skips` (the first few)."""
    skips: tuple[str, ...] = ()
    """``file: record N: why`` for the first :data:`MAX_REPORTED_SKIPS` skipped records."""


class _BadRecord(Exception):
    """One record is wrong; the caller adds the file and record number."""


class _Skip(Exception):
    """One record is not applied, for the reason given; the caller reports it."""


@dataclass
class _Tally:
    records: int = 0
    aspects: int = 0
    new_versions: int = 0
    patches: int = 0
    skipped: int = 0
    skips: list[str] = field(default_factory=list)
    urns: set[str] = field(default_factory=set)

    def skip(self, where: str, why: str) -> None:
        self.skipped += 1
        if len(self.skips) < MAX_REPORTED_SKIPS:
            self.skips.append(f"{where}: {why}")

    def summary(self, files: int) -> LoadSummary:
        return LoadSummary(
            files=files,
            records=self.records,
            urns=len(self.urns),
            aspects=self.aspects,
            new_versions=self.new_versions,
            patches=self.patches,
            skipped=self.skipped,
            skips=tuple(self.skips),
        )


def load_metadata_files(
    catalog: LiteCatalog | str | Path,
    files: Sequence[Path],
    *,
    progress: Progress | None = None,
    parallel: bool | None = None,
) -> LoadSummary:
    """Stream ``files``, in order, into ``catalog`` in one transaction.

    Args:
        catalog: An open Lite catalog, or the path of one (created when missing).
        files: DataHub metadata files: JSON lists of MCPs and/or MCEs.
        progress: Told the bytes read so far and the bytes of all files, now and then.
        parallel: Parse and validate in a second process while this one writes; by default
            for loads of :data:`~mlcopilot.catalog.load_stream.PARALLEL_FROM_BYTES` or more.

    Returns:
        What was read and written.

    Raises:
        InputError: on the first record of any file that is not valid DataHub metadata (or
            a PATCH that cannot be applied); nothing is written then.
        CatalogError: when the catalog cannot be opened or written (nothing is written then).
    """
    sizes = check_files(files)  # every file readable before the catalog is made
    if isinstance(catalog, LiteCatalog):
        return _load(catalog, files, sizes, progress, parallel)
    with open_lite_catalog(catalog, create=True) as opened:
        return _load(opened, files, sizes, progress, parallel)


def _load(
    catalog: LiteCatalog,
    files: Sequence[Path],
    sizes: Sequence[int],
    progress: Progress | None,
    parallel: bool | None,
) -> LoadSummary:
    tally = _Tally()
    total = sum(sizes)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    if parallel is None:
        parallel = total >= PARALLEL_FROM_BYTES
    try:
        with catalog.writing(parallel=parallel) as writer:
            events = prepared(files, _stream, _prepare, _BadRecord, parallel=parallel)
            for kind, index, number, payload in events:
                if kind == "read":
                    if progress is not None:
                        progress(starts[index] + payload, total)
                    continue
                where = f"{files[index]}: record {number}"
                if kind == "bad":
                    raise InputError(f"{where}: {payload}")
                tally.records += 1
                try:
                    _write(payload, writer, tally)
                except _BadRecord as exc:
                    raise InputError(f"{where}: {exc}") from exc
                except _Skip as exc:
                    tally.skip(where, str(exc))
            if progress is not None:
                progress(total, total)
    except CatalogError as exc:
        raise CatalogError(f"{exc} (nothing was loaded: the catalog is as it was)") from exc
    return tally.summary(len(files))


def read_metadata_file(path: Path) -> tuple[int, list[MetadataChangeProposalWrapper]]:
    """Parse and validate one metadata file of UPSERT MCPs and MCEs into SDK objects.

    For tests and tools that want the records as objects; loading streams instead
    (:func:`load_metadata_files`).

    Returns:
        The number of records and the MCPs they hold, one per aspect.

    Raises:
        InputError: naming the file (and record, counted from 1) on the first problem.
    """
    count = 0
    mcps: list[MetadataChangeProposalWrapper] = []
    for number, record in _stream(path, None):
        count += 1
        try:
            mcps += _parse_record(record)
        except _BadRecord as exc:
            raise InputError(f"{path}: record {number}: {exc}") from exc
    return count, mcps


def check_files(files: Sequence[Path]) -> list[int]:
    """The size of each file, once it is known to be readable.

    Raises:
        InputError: naming the first file that cannot be read.
    """
    return [_size(path) for path in files]


def _size(path: Path) -> int:
    try:
        with path.open("rb"):
            return path.stat().st_size
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _stream(path: Path, progress: Callable[[int], None] | None) -> Iterator[tuple[int, object]]:
    """Each record of the file's top-level list, numbered from 1, parsed as it is read.

    Files written a record a line (``[``, then each record and its comma on a line of its
    own: compact files) or a record over lines from a ``{`` to a ``}`` at the margin (DataHub's
    file sink) are cut into records by :class:`_Lines` and each parsed by msgspec, in a third
    of ``ijson``'s time (compact records) or two thirds (indented ones). From the first line
    that is not such a record (another layout, a record msgspec refuses or might read
    otherwise than ``ijson``, the closing ``]``) on, ``ijson`` reads the rest: what is read,
    and every error, is ``ijson``'s (``tests/catalog/test_load_fast_paths.py``).
    """
    try:
        file = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with file:
        _skip_bom(file)
        first = _first_byte(file)
        if first != ord("["):
            raise _not_a_list(path, first)
        lines = _Lines(file, progress)
        yield from lines
        file.seek(lines.resume)
        yield from _streamed(path, _Prefixed(lines.prefix, file), lines.number, progress)


def _streamed(
    path: Path, file: _Prefixed, number: int, progress: Callable[[int], None] | None
) -> Iterator[tuple[int, object]]:
    """The records ``ijson`` reads from ``file``, numbered on from ``number``."""
    records = ijson.items(file, "item", use_float=True, buf_size=256 * 1024)
    skip = file.skip
    while True:
        try:
            record = next(records)
        except StopIteration:
            break
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise _malformed(path, number, exc) from exc
        if skip:  # the stand-in for the records read a line at a time
            skip = False
            continue
        number += 1
        if progress is not None and number % 2000 == 0:
            progress(file.tell())
        yield number, record


_SPACE = b" \t\r\n"
"""JSON's whitespace (``bytes.strip()`` also strips form feeds and vertical tabs)."""
_CHUNK = 1024 * 1024
"""Bytes read at a time by :class:`_Lines`."""
_MAX_LINE = 8 * 1024 * 1024
"""Longer lines (and records) are left to ``ijson``: a file on one line is not read whole."""
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""``bytes.translate`` table: ASCII digits to ``0``, every other byte to a space."""
_LONG_NUMBER = b"0" * 19
"""Integers past 64 bits: ``ijson`` refuses them, msgspec reads them. A run of
19 digits anywhere (``bytes.translate`` then ``in``: ten times a regular expression's speed)
sends the line to ``ijson``."""
_CLOSING = (b"\n", b"\r\n", b",\n", b",\r\n")
"""What ends the line ``}`` (or ``},``) that closes an indented record."""


class _Lines:
    """The records of a file written a record a line, parsed by msgspec, until one is not.

    A record may also span lines as DataHub's file sink writes it (``json.dumps(record,
    indent=4)``): from a line ``{`` to a line ``}`` or ``},``, both at the margin. The file
    is read a chunk at a time (:data:`_CHUNK`), and a line or record is cut from the chunks
    with one search.

    Iterating yields ``(number, record)``; then :attr:`resume` is where ``ijson`` carries on
    in the file, after :attr:`prefix` (what ``ijson`` must read first to be in the same
    place: ``[``, or ``[0`` and ``[0,`` for a stand-in record in place of those read here),
    and :attr:`number` the records read here. At the end of a well-formed file ``ijson`` is
    left only the closing ``]`` and what follows it, so it checks the end as it always did.
    """

    def __init__(self, file: IO[bytes], progress: Callable[[int], None] | None) -> None:
        self._file = file
        self._progress = progress
        self._buffer = b""
        self._at = 0
        """Where the next line starts in :attr:`_buffer`."""
        self._base = file.tell()
        """Where :attr:`_buffer` starts in the file."""
        self._eof = False
        self.resume = self._base
        self.prefix = b""
        self.number = 0

    def __iter__(self) -> Iterator[tuple[int, object]]:
        progress = self._progress
        line = self._line()
        while line and not line.strip(_SPACE):  # blank lines before the "["
            self.resume = self._base + self._at
            line = self._line()
        if line.strip(_SPACE) != b"[":
            return  # ijson reads the whole file
        self.prefix = b"["
        value_next = True  # after "[" or a record's comma: a record comes next
        number = 0
        while True:
            self.resume = self._base + self._at
            line = self._line()
            text = line.strip(_SPACE)
            if not text:
                if line.endswith(b"\n"):
                    continue  # a blank line
                return  # the end of the file (ijson says what is missing), or a long line
            if not value_next or not line.endswith(b"\n") or text == b"]":
                return  # the closing "]", a line too long, or not one record a line
            if text == b"{" and line.rstrip(b"\r\n") == b"{":
                text = self._indented().strip(_SPACE)
                if not text:
                    return
            comma = text.endswith(b",")
            body = text[:-1] if comma else text
            # ijson's reading of a record msgspec refuses (or might read otherwise); when the
            # line is not one record for ijson either, ijson carries on from it.
            alone = _fast_record(body) or _one_record(body)
            if alone is None:
                return
            (record,) = alone
            number += 1
            self.number = number
            self.prefix = b"[0," if comma else b"[0"
            value_next = comma
            if progress is not None and number % 2000 == 0:
                progress(self.resume)
            yield number, record

    def _line(self) -> bytes:
        """The next line and its newline.

        Without the newline at the end of the file, or when the line is longer than
        :data:`_MAX_LINE` (its first bytes, then).
        """
        end = self._buffer.find(b"\n", self._at)
        while end < 0:
            if len(self._buffer) - self._at > _MAX_LINE or not self._more():
                line = self._buffer[self._at : self._at + _MAX_LINE]
                self._at += len(line)
                return line
            end = self._buffer.find(b"\n", self._at)
        line = self._buffer[self._at : end + 1]
        self._at = end + 1
        return line

    def _indented(self) -> bytes:
        """The record whose line ``{`` was just read, to its line ``}`` or ``},``.

        Found with one search of the buffer, not a line at a time. Empty when no such line
        comes within :data:`_MAX_LINE` bytes, or before the end of the file.
        """
        while True:
            buffer, at = self._buffer, self._at
            close = at if buffer.startswith(b"}", at) else _line_start(buffer, b"}", at)
            while 0 <= close <= len(buffer) - 4:  # "}" and the three bytes after it
                after = buffer[close + 1 : close + 4]
                closing = next((c for c in _CLOSING if after.startswith(c)), None)
                if closing is not None:
                    self._at = close + 1 + len(closing)
                    return b"{\n" + buffer[at : close + 1] + closing
                close = _line_start(buffer, b"}", close)
            if len(buffer) - at > _MAX_LINE or not self._more():
                return b""  # ijson reads the record (and says what is wrong with it)

    def _more(self) -> bool:
        """Read the next chunk, dropping what was read; False at the end of the file."""
        if self._eof:
            return False
        chunk = self._file.read(_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._base += self._at
        self._buffer = self._buffer[self._at :] + chunk
        self._at = 0
        return True


def _line_start(buffer: bytes, text: bytes, start: int) -> int:
    """Where the first line after ``start`` that begins with ``text`` begins, or -1."""
    found = buffer.find(b"\n" + text, start)
    return found + 1 if found >= 0 else -1


def _fast_record(text: bytes) -> tuple[object] | None:
    """The one JSON value ``text`` holds, by msgspec, when it reads it as ``ijson`` would."""
    if _LONG_NUMBER in text.translate(_DIGITS_AS_ZERO):
        return None
    try:
        return (_DECODE(text),)
    except (msgspec.DecodeError, RecursionError):  # nested too deep for msgspec: ijson's call
        return None


_DECODE = msgspec.json.Decoder().decode


def _one_record(text: bytes) -> tuple[object] | None:
    """The one JSON value ``text`` holds, as ``ijson`` reads it; None when it is not one."""
    try:
        found = list(ijson.items(io.BytesIO(b"[" + text + b"]"), "item", use_float=True))
    except (ijson.JSONError, UnicodeDecodeError):
        return None
    return (found[0],) if len(found) == 1 else None


class _Prefixed:
    """``file`` from where it is, after ``prefix``: what ``ijson`` reads to carry on."""

    def __init__(self, prefix: bytes, file: IO[bytes]) -> None:
        self._prefix = prefix
        self._file = file
        self.skip = prefix.startswith(b"[0")
        """Whether the first record ``ijson`` reads is the stand-in ``0``."""

    def read(self, size: int = -1) -> bytes:
        if not self._prefix:
            return self._file.read(size)
        if size == 0:
            return b""
        head, self._prefix = self._prefix, b""
        rest = self._file.read(size - len(head)) if size > len(head) else b""
        return head + rest

    def tell(self) -> int:
        return self._file.tell()


def _skip_bom(file: IO[bytes]) -> None:
    # Tolerate a BOM from Windows editors.
    if file.read(3) != b"\xef\xbb\xbf":
        file.seek(0)


def _first_byte(file: IO[bytes]) -> int | None:
    start = file.tell()
    while chunk := file.read(4096):
        text = chunk.lstrip()
        if text:
            file.seek(start)
            return text[0]
        start = file.tell()
    return None


def _not_a_list(path: Path, first: int | None) -> InputError:
    if path.stat().st_size <= _EXACT_ERRORS_UP_TO:
        data = _read_json(path)  # raises with line and column when it is not JSON at all
        return InputError(
            f"{path}: expected a JSON list of DataHub MCPs/MCEs, got {_json_kind(data)}"
        )
    kind = _FIRST_CHAR_KINDS.get(first or 0, "a number")
    return InputError(f"{path}: expected a JSON list of DataHub MCPs/MCEs, got {kind}")


def _malformed(path: Path, records: int, exc: Exception) -> InputError:
    if path.stat().st_size <= _EXACT_ERRORS_UP_TO:
        _read_json(path)  # raises the error with its line and column
    reason = _brief(exc)
    return InputError(f"{path}: not valid JSON after record {records}: {reason}")


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a BOM from Windows editors
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc


# --- one record --------------------------------------------------------------------------


def _prepare(record: object) -> tuple[Any, ...]:
    """Validate one record, without the catalog; what :func:`_write` then writes.

    Runs in the reader process of a large load (:mod:`mlcopilot.catalog.load_stream`), so it
    returns plain, picklable tuples, aspects as the JSON text Lite stores.
    """
    if not isinstance(record, dict):
        raise _BadRecord(f"expected a JSON object, got {_json_kind(record)}")
    if "proposedSnapshot" in record:
        aspects = []
        for mcp in _from_mce(record):
            assert mcp.entityUrn, mcp  # set by mcps_from_mce
            assert mcp.aspectName, mcp
            assert mcp.aspect is not None, mcp
            system = mcp.systemMetadata.to_obj() if mcp.systemMetadata else None
            text = json.dumps(pre_json_transform(mcp.aspect.to_obj()))
            aspects.append((mcp.entityUrn, mcp.aspectName, text, system))
        return ("mce", aspects)
    if "aspect" not in record and "aspectName" not in record:
        raise _BadRecord(
            "neither an MCP (entityUrn, aspectName, aspect) nor an MCE (proposedSnapshot)"
        )
    urn, entity_type, change, name = _mcp_head(record)
    if change in _SKIPPED_CHANGES:
        return ("skip", _SKIPPED_CHANGES[change])
    system = _system_metadata_json(record)
    if change == "PATCH":
        operations = _patch_payload(name, record.get("aspect"))
        return ("patch", urn, entity_type, name, operations, system)
    value = _aspect_json(entity_type, name, _payload(name, record.get("aspect")))
    return ("put", urn, name, dumps(ASPECT_MAP[name], value), system, change)


def _write(item: tuple[Any, ...], writer: LiteWriter, tally: _Tally) -> None:
    """Write one prepared record; raise :class:`_Skip` for one not applied."""
    kind = item[0]
    if kind == "put":
        _, urn, name, text, system, change = item
        if change == "CREATE_ENTITY" and writer.entity_exists(urn):
            raise _Skip(f"CREATE_ENTITY: {urn} exists already (GMS refuses such a proposal)")
        outcome = writer.put(urn, name, None, system, text=text, create_only=change == "CREATE")
        if outcome is Outcome.EXISTS:
            raise _Skip(f"CREATE: aspect {name!r} of {urn} exists already (GMS refuses it too)")
        _count(tally, urn, outcome)
    elif kind == "mce":
        for urn, name, text, system in item[1]:
            _count(tally, urn, writer.put(urn, name, None, system, text=text))
    elif kind == "patch":
        _, urn, entity_type, name, operations, system = item
        try:
            patched = apply_patch(name, writer.current(urn, name), operations)
        except PatchError as exc:
            raise _BadRecord(str(exc)) from exc  # it names the aspect, operation and path
        value = _aspect_json(entity_type, name, patched)
        tally.patches += 1
        _count(tally, urn, writer.put(urn, name, value, system))
    else:
        raise _Skip(item[1])


def _count(tally: _Tally, urn: str, outcome: Outcome) -> None:
    tally.urns.add(urn)
    tally.aspects += 1
    tally.new_versions += outcome is Outcome.NEW_VERSION


def _mcp_head(record: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(urn, entity type, change type, aspect name) of an MCP, each checked."""
    urn = record.get("entityUrn")
    if not isinstance(urn, str) or not urn:
        raise _BadRecord("an MCP needs an entityUrn (entityKeyAspect alone is not supported)")
    entity_type = _entity_type(urn)
    declared = record.get("entityType")
    if declared is not None and str(declared).lower() != entity_type.lower():
        raise _BadRecord(f"entityType {declared!r} does not match the urn {urn!r}")
    change = record.get("changeType", "UPSERT")
    if change not in _CHANGE_TYPES:
        raise _BadRecord(
            f"change type {change!r} is not one of DataHub's ({', '.join(sorted(_CHANGE_TYPES))})"
        )
    name = record.get("aspectName")
    if not isinstance(name, str) or not name:
        raise _BadRecord("an MCP needs an aspectName")
    if name not in ASPECT_MAP:
        raise _BadRecord(f"unknown aspect {name!r}")
    _check_allowed(entity_type, name)
    return urn, entity_type, change, name


def _patch_payload(name: str, aspect: object) -> Any:
    if isinstance(aspect, dict) and "json" in aspect:
        return aspect["json"]
    if isinstance(aspect, dict) and isinstance(aspect.get("value"), str):
        content_type = aspect.get("contentType", _PATCH_CONTENT_TYPE)
        if content_type not in (_PATCH_CONTENT_TYPE, JSON_CONTENT_TYPE):
            raise _BadRecord(f"PATCH of {name!r}: content type {content_type!r} is not supported")
        try:
            return json.loads(aspect["value"])
        except json.JSONDecodeError as exc:
            raise _BadRecord(f"PATCH of {name!r}: value is not valid JSON: {exc.msg}") from exc
    raise _BadRecord(
        f'PATCH of {name!r} must be {{"json": [...]}} '
        f'or {{"value": "<JSON text>", "contentType": "{_PATCH_CONTENT_TYPE}"}}'
    )


def _aspect_json(entity_type: str, name: str, payload: Any) -> dict[str, Any]:
    """The aspect's JSON as the SDK serialises it, once validated against its class."""
    if not isinstance(payload, dict):
        raise _BadRecord(f"aspect {name!r} is not valid: expected an object")
    try:
        return normalise(ASPECT_MAP[name], payload)
    except NotFast:
        # The SDK decides, and says what is wrong.
        value: dict[str, Any] = pre_json_transform(_aspect(entity_type, name, payload).to_obj())
        return value


def _system_metadata_json(record: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = record.get("systemMetadata")
    if raw is None:
        return None
    try:
        return normalise(SystemMetadataClass, raw)
    except NotFast:
        system = _system_metadata(record)
        assert system is not None, record
        value: dict[str, Any] = system.to_obj()
        return value


def _parse_record(record: object) -> list[MetadataChangeProposalWrapper]:
    if not isinstance(record, dict):
        raise _BadRecord(f"expected a JSON object, got {_json_kind(record)}")
    if "proposedSnapshot" in record:
        return _from_mce(record)
    if "aspect" in record or "aspectName" in record:
        return [_from_mcp(record)]
    raise _BadRecord("neither an MCP (entityUrn, aspectName, aspect) nor an MCE (proposedSnapshot)")


def _from_mcp(record: Mapping[str, Any]) -> MetadataChangeProposalWrapper:
    urn, entity_type, change, name = _mcp_head(record)
    if change != "UPSERT":
        raise _BadRecord(f"change type {change!r} is not supported here, only UPSERT")
    aspect = _aspect(entity_type, name, _payload(name, record.get("aspect")))
    return MetadataChangeProposalWrapper(
        entityUrn=urn, aspect=aspect, systemMetadata=_system_metadata(record)
    )


def _from_mce(record: Mapping[str, Any]) -> list[MetadataChangeProposalWrapper]:
    snapshot = record["proposedSnapshot"]
    if not isinstance(snapshot, dict) or len(snapshot) != 1:
        raise _BadRecord("proposedSnapshot must be an object holding one snapshot")
    kind = next(iter(snapshot))
    if kind.rsplit(".", 1)[-1] not in _SNAPSHOT_TYPES:
        raise _BadRecord(f"unknown snapshot type {kind!r}")
    try:
        mce = MetadataChangeEventClass.from_obj(dict(record))
    except ax.TranslationError as exc:
        raise _BadRecord(f"not a valid MCE: {_brief(exc)}") from exc
    entity_type = _entity_type(mce.proposedSnapshot.urn)
    for aspect, raw in zip(mce.proposedSnapshot.aspects, _raw_aspect_names(record), strict=True):
        # An unknown union member is parsed as the first candidate, silently; catch that.
        if raw.rsplit(".", 1)[-1] != type(aspect).RECORD_SCHEMA.name:
            raise _BadRecord(f"unknown aspect {raw!r}")
        _check_allowed(entity_type, aspect.get_aspect_name())
        _check_valid(aspect.get_aspect_name(), aspect)
    if not mce.validate():
        raise _BadRecord("not a valid MCE")
    return list(mcps_from_mce(mce))


def _raw_aspect_names(record: Mapping[str, Any]) -> list[str]:
    snapshot = next(iter(record["proposedSnapshot"].values()))
    return [next(iter(a)) if isinstance(a, dict) and a else "" for a in snapshot["aspects"]]


def _entity_type(urn: str) -> str:
    # Files repeat each urn once per aspect, one after the other: parse each once.
    entity_type, problem = _parsed_entity_type(urn)
    if problem:
        raise _BadRecord(problem)
    return entity_type


@lru_cache(maxsize=4096)
def _parsed_entity_type(urn: str) -> tuple[str, str]:
    try:
        return _checked_entity_type(urn), ""
    except _BadRecord as exc:
        return "", str(exc)


def _checked_entity_type(urn: str) -> str:
    try:
        entity_type = SdkUrn.from_string(urn).entity_type
    except ax.TranslationError as exc:
        raise _BadRecord(f"invalid urn {urn!r}: {_brief(exc)}") from exc
    if entity_type not in ENTITY_TYPE_TO_ASPECT_NAMES:
        raise _BadRecord(f"unknown entity type {entity_type!r} in urn {urn!r}")
    return str(entity_type)


def _payload(name: str, aspect: object) -> Any:
    if isinstance(aspect, dict) and "json" in aspect:
        return aspect["json"]
    if isinstance(aspect, dict) and isinstance(aspect.get("value"), str):
        content_type = aspect.get("contentType", JSON_CONTENT_TYPE)
        if content_type != JSON_CONTENT_TYPE:
            raise _BadRecord(f"aspect {name!r}: content type {content_type!r} is not supported")
        try:
            return json.loads(aspect["value"])
        except json.JSONDecodeError as exc:
            raise _BadRecord(f"aspect {name!r}: value is not valid JSON: {exc.msg}") from exc
    raise _BadRecord(
        f'aspect {name!r} must be {{"json": {{...}}}} '
        f'or {{"value": "<JSON text>", "contentType": "application/json"}}'
    )


def _aspect(entity_type: str, name: str, payload: Any) -> _Aspect:
    """The SDK's object for one aspect payload, or the SDK's reason it is not valid."""
    if not isinstance(payload, dict):
        raise _BadRecord(f"aspect {name!r} is not valid: expected an object")
    try:
        aspect: _Aspect = ASPECT_MAP[name].from_obj(post_json_transform(payload))
    except ax.TranslationError as exc:
        raise _BadRecord(f"aspect {name!r} is not valid: {_brief(exc)}") from exc
    _check_valid(name, aspect)
    return aspect


def _check_allowed(entity_type: str, name: str) -> None:
    if not _allowed(entity_type, name):
        raise _BadRecord(f"aspect {name!r} is not an aspect of entity type {entity_type!r}")


@lru_cache(maxsize=4096)
def _allowed(entity_type: str, name: str) -> bool:
    # Asked once per record: the SDK's list of an entity type's aspects is searched once.
    allowed = ENTITY_TYPE_TO_ASPECT_NAMES[entity_type]
    return name in allowed or name == KEY_ASPECTS[entity_type].ASPECT_NAME


def _check_valid(name: str, aspect: _Aspect) -> None:
    if not aspect.validate():
        raise _BadRecord(f"aspect {name!r} is not valid: {_invalid_field(aspect)}")


def _system_metadata(record: Mapping[str, Any]) -> SystemMetadataClass | None:
    raw = record.get("systemMetadata")
    if raw is None:
        return None
    try:
        system = SystemMetadataClass.from_obj(post_json_transform(raw))
    except ax.TranslationError as exc:
        raise _BadRecord(f"systemMetadata is not valid: {_brief(exc)}") from exc
    if not system.validate():
        raise _BadRecord(f"systemMetadata is not valid: {_invalid_field(system)}")
    return system


def _invalid_field(record: DictWrapper) -> str:
    """Say which field makes an SDK record fail validation, and with what value."""
    converter = record._get_json_converter()  # the converter validate() itself uses
    schema: Any = record.RECORD_SCHEMA
    datum: Any = record
    path: list[str] = []
    while True:
        child = _first_invalid_child(converter, schema, datum)
        if child is None:
            break
        step, schema, datum = child
        path.append(step)
    where = "".join(path).lstrip(".") or "value"
    return f"field {where!r} does not fit the schema (got {_short(datum)})"


def _first_invalid_child(converter: Any, schema: Any, datum: Any) -> tuple[str, Any, Any] | None:
    if schema.type == "record" and isinstance(datum, DictWrapper | dict):
        for field in schema.fields:
            value = datum.get(field.name, field.default if field.has_default else None)
            if not converter.validate(field.type, value):
                return f".{field.name}", field.type, value
    elif schema.type == "array" and isinstance(datum, list):
        for index, item in enumerate(datum):
            if not converter.validate(schema.items, item):
                return f"[{index}]", schema.items, item
    elif schema.type == "map" and isinstance(datum, dict):
        for key, item in datum.items():
            if not converter.validate(schema.values, item):
                return f"[{key!r}]", schema.values, item
    elif schema.type == "union" and isinstance(datum, DictWrapper):
        for candidate in schema.schemas:
            if getattr(candidate, "fullname", None) == datum.RECORD_SCHEMA.fullname:
                return "", candidate, datum
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _JSON_KINDS.get(type(value), type(value).__name__)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _brief(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    return _short_text(lines[0])


def _short_text(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."
