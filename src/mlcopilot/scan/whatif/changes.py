"""A proposed change to one dataset, from flags or from a proposed schema, checked.

A :class:`ChangeSet` is what ``mlcopilot impact`` previews: columns dropped, renamed or
retyped, and the dataset deprecated. :func:`apply_to_schema` turns it into the schema the
dataset would have after the change; every column it names must exist in the current one.

From a proposed schema (:func:`derive_changes`) the changes are derived by field path: a
column only in the current schema is dropped, one only in the proposed schema is added, one
in both whose type differs is retyped: a type only spelled differently on the dataset's
platform (``long`` and ``bigint`` on Hive, ``string`` and ``STRING``) is the same type
(:func:`~mlcopilot.checks.column_types.same_type`, as schema drift judges it). A dropped and
an added column are reported as one column renamed when they have the same type and either
the same position or the same non-empty description (each column pairs at most once, in
column order). That list is what the preview *says* changed; what the change breaks is
decided by the scan's own checks on the proposed schema, whose schema-drift check applies its
own rename scoring.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from mlcopilot.checks.column_types import same_type, type_family
from mlcopilot.errors import UsageError
from mlcopilot.model import Deprecation, Schema, SchemaField

ColumnChangeKind = Literal["dropped", "renamed", "retyped", "added"]

LOGICAL_TYPES = (
    "BooleanType",
    "FixedType",
    "StringType",
    "BytesType",
    "NumberType",
    "DateType",
    "TimeType",
    "EnumType",
    "NullType",
    "MapType",
    "ArrayType",
    "UnionType",
    "RecordType",
)
"""DataHub's logical field types (``SchemaFieldDataType.type``), by class short name."""

_NATIVE_TO_LOGICAL: tuple[tuple[tuple[str, ...], str], ...] = (
    (("bool", "boolean"), "BooleanType"),
    (
        (
            "tinyint",
            "smallint",
            "int",
            "integer",
            "bigint",
            "long",
            "short",
            "byte",
            "float",
            "double",
            "real",
            "decimal",
            "numeric",
            "number",
            "int2",
            "int4",
            "int8",
            "float4",
            "float8",
            "hugeint",
        ),
        "NumberType",
    ),
    (
        (
            "string",
            "varchar",
            "char",
            "text",
            "nvarchar",
            "nchar",
            "character",
            "uuid",
            "json",
            "jsonb",
            "variant",
        ),
        "StringType",
    ),
    (("date",), "DateType"),
    (
        (
            "timestamp",
            "timestamptz",
            "timestamp_ntz",
            "timestamp_ltz",
            "timestamp_tz",
            "datetime",
            "datetime2",
            "time",
        ),
        "TimeType",
    ),
    (("bytes", "binary", "varbinary", "blob", "bytea"), "BytesType"),
    (("array", "list"), "ArrayType"),
    (("map",), "MapType"),
    (("struct", "record", "object"), "RecordType"),
    (("enum",), "EnumType"),
)
_LOGICAL_OF = {native: logical for natives, logical in _NATIVE_TO_LOGICAL for native in natives}
_BASE = re.compile(r"[a-z_0-9]+")


def logical_type_of(native_type: str) -> str | None:
    """DataHub's logical type of a native type (``varchar(20)``: ``StringType``); None: unknown."""
    base = _BASE.match(native_type.strip().lower())
    return _LOGICAL_OF.get(base.group(0)) if base else None


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """One column's change: ``column`` is its current name (the new one for ``added``)."""

    kind: ColumnChangeKind
    column: str
    new_name: str | None = None
    """For ``renamed``: the name it gets."""
    new_type: str | None = None
    """For ``retyped`` (and ``added``): the type it gets, native if known, else logical."""

    def describe(self) -> str:
        """``drop email``, ``rename email to email_address``, ``retype age to string``."""
        if self.kind == "renamed":
            return f"rename {self.column} to {self.new_name}"
        if self.kind == "retyped":
            return f"retype {self.column} to {self.new_type}"
        if self.kind == "added":
            return f"add {self.column}" + (f" ({self.new_type})" if self.new_type else "")
        return f"drop {self.column}"


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """What would change on the dataset.

    ``schema`` is the proposed schema when the changes come from a schema file (the columns
    are then derived from it, for display); else None, and ``columns`` are applied in order.
    """

    columns: tuple[ColumnChange, ...] = ()
    deprecation: Deprecation | None = None
    schema: Schema | None = None
    source: str = ""
    """Where the changes come from, e.g. ``--drop email`` or ``schema file new.json``."""

    @property
    def empty(self) -> bool:
        """True when nothing would change."""
        return not self.columns and self.deprecation is None and self.schema is None

    def describe(self) -> list[str]:
        """One line per change, e.g. ``drop email``, ``deprecate``."""
        lines = [c.describe() for c in self.columns]
        if self.deprecation is not None:
            lines.append("deprecate")
        if self.schema is not None and not self.columns:
            lines.append("no column changes (the proposed schema has the same columns)")
        return lines


def parse_changes(
    *,
    drop: Sequence[str] = (),
    rename: Sequence[str] = (),
    retype: Sequence[str] = (),
    deprecation: Deprecation | None = None,
) -> ChangeSet:
    """The change set the flags ask for (``--drop C``, ``--rename OLD=NEW``, ``--retype C=TYPE``).

    Raises:
        UsageError: A value without its ``=``, an empty name, or a column named twice.
    """
    columns: list[ColumnChange] = []
    for column in drop:
        columns.append(ColumnChange("dropped", _name("--drop", column, column)))
    for value in rename:
        old, new = _pair("--rename", value, "OLD=NEW")
        if old == new:
            raise UsageError(f"--rename {value}: the old and the new name are the same")
        columns.append(ColumnChange("renamed", old, new_name=new))
    for value in retype:
        column, new_type = _pair("--retype", value, "COLUMN=TYPE")
        columns.append(ColumnChange("retyped", column, new_type=new_type))
    seen: dict[str, ColumnChange] = {}
    for change in columns:
        if change.column in seen:
            raise UsageError(
                f"column {change.column!r} is changed twice ({seen[change.column].describe()}; "
                f"{change.describe()}): give one change per column"
            )
        seen[change.column] = change
    targets = [c.new_name for c in columns if c.new_name is not None]
    for target in targets:
        if targets.count(target) > 1:
            raise UsageError(f"--rename: two columns would both be named {target!r}")
    return ChangeSet(tuple(columns), deprecation, source="flags")


def _name(flag: str, value: str, name: str) -> str:
    name = name.strip()
    if not name:
        raise UsageError(f"{flag} {value!r}: the column name is empty")
    return name


def _pair(flag: str, value: str, shape: str) -> tuple[str, str]:
    if "=" not in value:
        raise UsageError(f"{flag} {value!r}: expected {shape} (e.g. {flag} {_example(flag)})")
    left, right = value.split("=", 1)
    return _name(flag, value, left), _name(flag, value, right)


def _example(flag: str) -> str:
    return "email=email_address" if flag == "--rename" else "age=string"


def apply_to_schema(
    current: Schema | None, changes: ChangeSet, *, where: str, platform: str | None = None
) -> Schema | None:
    """The dataset's schema once ``changes`` are made (``current`` when none touch it).

    Args:
        current: The dataset's schema now (None: the catalog has none).
        changes: The changes; a proposed schema replaces ``current`` whole.
        where: The dataset, for the error messages.
        platform: The dataset's platform (``hive``), whose spellings of a type are one type.

    Raises:
        UsageError: A column change on a dataset without a schema, a column that is not in
            the current schema, a rename onto an existing column, or a retype to the same type
            (another spelling of it included).
    """
    if changes.schema is not None:
        return changes.schema
    if not changes.columns:
        return current
    if current is None:
        raise UsageError(
            f"{changes.columns[0].describe()}: {where} has no schema in the catalog "
            "(no schemaMetadata), so it has no column to change"
        )
    fields = {f.path: f for f in current.fields}
    for asked in changes.columns:
        if asked.column not in fields:
            raise UsageError(
                f"{asked.describe()}: {where} has no column {asked.column!r}"
                + _columns_hint(current, asked.column)
            )
    renamed = {c.new_name for c in changes.columns if c.kind == "renamed"}
    dropped_or_moved = {c.column for c in changes.columns if c.kind in ("dropped", "renamed")}
    for name in renamed:
        if name in fields and name not in dropped_or_moved:
            raise UsageError(f"rename to {name}: {where} already has a column {name!r}")
    by_column = {c.column: c for c in changes.columns}
    result: list[SchemaField] = []
    for field in current.fields:
        change = by_column.get(field.path)
        if change is None:
            result.append(field)
        elif change.kind == "renamed":
            assert change.new_name is not None
            result.append(replace(field, path=change.new_name))
        elif change.kind == "retyped":
            assert change.new_type is not None
            result.append(_retyped(field, change.new_type, platform))
    # Positions are the order of the fields, as the catalog reads them.
    return Schema(tuple(replace(f, position=i) for i, f in enumerate(result)))


def _retyped(field: SchemaField, new_type: str, platform: str | None) -> SchemaField:
    """``field`` with the type ``new_type``: a logical type name, else a native type."""
    logical = next((t for t in LOGICAL_TYPES if t.lower() == new_type.lower()), None)
    if logical is not None:
        changed = replace(field, type=logical, native_type="")
    else:
        changed = replace(field, type=logical_type_of(new_type) or field.type, native_type=new_type)
    if (logical is not None and logical == field.type) or (
        logical is None and same_type(field, changed, platform)
    ):
        current = field.native_type or field.type
        spelled = ""
        if logical is None and new_type.strip() != current:
            family = type_family(new_type, platform)
            on = f" on {platform}" if platform else ""
            spelled = f" ({new_type} is another spelling of it{on}" + (
                f": {family})" if family else ")"
            )
        raise UsageError(f"retype {field.path} to {new_type}: it already is {current}{spelled}")
    return changed


def _columns_hint(schema: Schema, name: str) -> str:
    import difflib

    paths = [f.path for f in schema.fields]
    close = difflib.get_close_matches(name, paths, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {', '.join(close)}?"
    shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
    return f"; its columns: {shown}" if paths else "; its schema has no columns"


def derive_changes(
    current: Schema | None, proposed: Schema, *, source: str, platform: str | None = None
) -> ChangeSet:
    """The column changes from ``current`` to ``proposed`` (see the module's rule for renames).

    ``platform``: the dataset's (``hive``), whose spellings of one type are not a retype.
    """
    before = {f.path: f for f in (current.fields if current is not None else ())}
    after = {f.path: f for f in proposed.fields}
    dropped = [f for f in before.values() if f.path not in after]
    added = [f for f in after.values() if f.path not in before]
    pairs: dict[str, SchemaField] = {}
    taken: set[str] = set()
    for old in dropped:
        for new in added:
            if new.path not in taken and _looks_renamed(old, new, platform):
                pairs[old.path] = new
                taken.add(new.path)
                break
    changes: list[ColumnChange] = []
    for old in before.values():
        if old.path in pairs:
            changes.append(ColumnChange("renamed", old.path, new_name=pairs[old.path].path))
        elif old.path not in after:
            changes.append(ColumnChange("dropped", old.path))
        elif not same_type(old, after[old.path], platform):
            changes.append(ColumnChange("retyped", old.path, new_type=_shown(after[old.path])))
    for new in proposed.fields:
        if new.path not in before and new.path not in taken:
            changes.append(ColumnChange("added", new.path, new_type=_shown(new)))
    return ChangeSet(tuple(changes), schema=proposed, source=source)


def _looks_renamed(old: SchemaField, new: SchemaField, platform: str | None) -> bool:
    same_description = bool(old.description.strip()) and (
        old.description.strip() == new.description.strip()
    )
    return same_type(old, new, platform) and (old.position == new.position or same_description)


def _shown(field: SchemaField) -> str:
    return field.native_type or field.type
