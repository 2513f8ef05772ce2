"""When two spellings of a column's type are one type: native types in families, per platform.

Connectors, dbt and people spell one type many ways: Hive's ``long`` is ``bigint``, a dbt
manifest says ``string`` where the Spark connector ingested ``STRING``, Snowflake's ``INT`` is
its ``NUMBER(38,0)``. A column whose type is only spelled differently has not been retyped:
:func:`same_type` compares the *logical* type each spelling stands for on the dataset's
platform, and only a change of that is a retype (schema drift, ``mlcopilot impact``).

The rule, in order:

1. case, spacing and DataHub's own logical type do not matter when both native types are
   known: each is read into its family (:data:`FAMILIES`, with the platform's own meanings in
   :data:`PLATFORMS` first) and the families are compared;
2. within a family, lengths (``varchar(20)``), display widths (``int(11)``) and fractional
   second precisions (``timestamp(6)``) are not part of the type; a decimal's precision and
   scale are, when both spellings give them (``decimal(10,2)`` to ``decimal(12,4)`` is a
   retype, ``numeric`` to ``numeric(10,2)`` is not);
3. ``array<…>``, ``map<…>`` and ``struct<…>`` compare their element types by the same rule;
4. a native type this table does not know is compared as written, ignoring case and spaces,
   together with DataHub's logical type; a field without a native type is compared by
   DataHub's logical type alone.

The README's table of equivalences is this module's, in words: keep them together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from mlcopilot.model import SchemaField

_DATASET = "urn:li:dataset:("
_PLATFORM = "urn:li:dataPlatform:"

FAMILIES: Mapping[str, tuple[str, ...]] = {
    "boolean": ("bool", "boolean"),
    "int8": ("tinyint", "byte", "int1"),
    "int16": ("smallint", "short", "int2", "smallserial"),
    "int32": ("int", "integer", "int4", "serial"),
    "int64": ("bigint", "long", "int8", "int64", "bigserial"),
    "float32": ("float", "real", "float4"),
    "float64": ("double", "double precision", "float8", "float64"),
    "decimal": ("decimal", "numeric", "dec", "number"),
    "string": (
        "string",
        "varchar",
        "character varying",
        "text",
        "nvarchar",
        "varchar2",
        "nvarchar2",
        "tinytext",
        "mediumtext",
        "longtext",
        "clob",
        "nclob",
        "ntext",
        "citext",
    ),
    "char": ("char", "character", "nchar", "bpchar"),
    "binary": (
        "binary",
        "varbinary",
        "bytes",
        "blob",
        "tinyblob",
        "mediumblob",
        "longblob",
        "bytea",
    ),
    "date": ("date",),
    "time": ("time", "time without time zone"),
    "timetz": ("timetz", "time with time zone"),
    "timestamp": (
        "timestamp",
        "timestamp without time zone",
        "timestamp_ntz",
        "datetime",
        "datetime2",
        "smalldatetime",
    ),
    "timestamp_tz": ("timestamptz", "timestamp with time zone", "timestamp_tz", "datetimeoffset"),
    "timestamp_ltz": ("timestamp_ltz", "timestamp with local time zone"),
    "uuid": ("uuid", "uniqueidentifier"),
    "json": ("json", "jsonb"),
    "interval": ("interval",),
}
"""Each family and the spellings that stand for it on every platform but those below."""

_INTEGERS = ("int", "integer", "bigint", "smallint", "tinyint", "byteint")
_FLOATS = ("float", "float4", "float8", "double", "double precision", "real")
_TEXT = ("string", "text", "varchar", "char", "character", "nchar", "nvarchar", "nvarchar2")

PLATFORMS: Mapping[str, Mapping[str, str]] = {
    # Every integer is NUMBER(38,0); every float is 64-bit; CHAR is VARCHAR(1); TIMESTAMP and
    # DATETIME are TIMESTAMP_NTZ (the default TIMESTAMP_TYPE_MAPPING).
    "snowflake": {
        **dict.fromkeys(_INTEGERS, "decimal(38,0)"),
        **dict.fromkeys(("number", "decimal", "numeric"), "decimal(38,0)"),
        **dict.fromkeys(_FLOATS, "float64"),
        **dict.fromkeys(_TEXT, "string"),
        "datetime": "timestamp",
    },
    # INT64's aliases; FLOAT64; NUMERIC is NUMERIC(38,9); DATETIME has no time zone and
    # TIMESTAMP is an instant.
    "bigquery": {
        **dict.fromkeys((*_INTEGERS, "int64"), "int64"),
        **dict.fromkeys(("float", "float64"), "float64"),
        **dict.fromkeys(("numeric", "decimal"), "decimal(38,9)"),
        **dict.fromkeys(("bignumeric", "bigdecimal"), "decimal(76,38)"),
        "datetime": "timestamp",
        "timestamp": "timestamp_tz",
    },
    # FLOAT without a precision is DOUBLE PRECISION.
    "postgres": {"float": "float64"},
    "redshift": {"float": "float64"},
    # LONG is MEDIUMTEXT; REAL is DOUBLE; BOOL is TINYINT(1); TIMESTAMP is an instant.
    "mysql": {
        "long": "string",
        "real": "float64",
        "tinyint(1)": "boolean",
        "timestamp": "timestamp_tz",
    },
    "mariadb": {
        "long": "string",
        "real": "float64",
        "tinyint(1)": "boolean",
        "timestamp": "timestamp_tz",
    },
    # FLOAT is FLOAT(53); BIT is the boolean.
    "mssql": {"float": "float64", "bit": "boolean", "money": "decimal(19,4)"},
    # LONG is text; DATE holds a time of day too.
    "oracle": {
        "long": "string",
        "date": "timestamp",
        "binary_float": "float32",
        "binary_double": "float64",
        "raw": "binary",
    },
}
"""What a spelling means on one platform (``urn:li:dataPlatform:NAME``) where that differs."""

_BY_SPELLING = {spelling: name for name, spellings in FAMILIES.items() for spelling in spellings}
_PARAMETERS = re.compile(r"^(?P<name>[^(]*?)\s*(?:\((?P<params>[^)]*)\))?\s*(?P<rest>[^()]*)$")
_COMPLEX = re.compile(r"^(?P<kind>array|map|struct)\s*<(?P<inner>.*)>$")


@dataclass(frozen=True, slots=True)
class _Type:
    """A native type read into its family: parameters kept only where they count."""

    family: str
    params: tuple[str, ...] | None = None
    """A decimal's precision and scale; None when not given (or not part of the type)."""
    members: tuple[tuple[str, _Type], ...] = ()
    """The element types of an array, map or struct (a struct's with their names)."""

    def same(self, other: _Type) -> bool:
        if self.family != other.family or len(self.members) != len(other.members):
            return False
        if self.params is not None and other.params is not None and self.params != other.params:
            return False
        return all(
            name == other_name and member.same(other_member)
            for (name, member), (other_name, other_member) in zip(
                self.members, other.members, strict=True
            )
        )


def platform_of(urn: str) -> str | None:
    """A dataset urn's platform: ``hive`` of ``urn:li:dataset:(urn:li:dataPlatform:hive,…)``."""
    if not urn.startswith(_DATASET):
        return None
    platform = urn[len(_DATASET) :].partition(",")[0]
    return platform.removeprefix(_PLATFORM).lower() or None


def type_family(native_type: str, platform: str | None = None) -> str | None:
    """The family a native type is on ``platform`` (``long`` on ``hive``: ``int64``); None: unknown.

    Parameters that count are kept (``decimal(10,2)``); complex types name their elements'.
    """
    read = _read(native_type, platform)
    return None if read is None else _shown(read)


def same_type(old: SchemaField, new: SchemaField, platform: str | None = None) -> bool:
    """Whether ``old`` and ``new`` have one logical type on ``platform`` (see the module)."""
    if old.native_type == new.native_type and old.type == new.type:
        return True  # one spelling of one logical type: every rule below says the same
    a, b = old.native_type.strip(), new.native_type.strip()
    if not a or not b:
        return old.type == new.type
    read_a, read_b = _read(a, platform), _read(b, platform)
    if read_a is not None and read_b is not None:
        return read_a.same(read_b)
    if read_a is not None or read_b is not None:
        return False
    return _spelling(a) == _spelling(b) and old.type == new.type


def _spelling(native: str) -> str:
    return "".join(native.lower().split())


@lru_cache(maxsize=1 << 12)  # a catalog spells its types a few dozen ways
def _read(native: str, platform: str | None) -> _Type | None:
    text = " ".join(native.lower().split())
    complex_type = _COMPLEX.match(text)
    if complex_type is not None:
        return _complex(complex_type["kind"], complex_type["inner"], platform)
    parts = _PARAMETERS.match(text)
    if parts is None:
        return None
    name = " ".join(f"{parts['name']} {parts['rest']}".split())
    params = tuple(p.strip() for p in parts["params"].split(",")) if parts["params"] else None
    meanings = PLATFORMS.get(platform or "", {})
    # A spelling with its parameters first (MySQL's tinyint(1)), then the name alone.
    family = meanings.get(f"{name}({','.join(params)})" if params else name) or meanings.get(name)
    family = family or _BY_SPELLING.get(name)
    if family is None:
        return None
    fixed = _PARAMETERS.match(family)
    assert fixed is not None
    if fixed["params"]:  # the platform fixes them (Snowflake's INT is NUMBER(38,0))
        base = fixed["name"]
        return _Type(base, params if params and name in FAMILIES["decimal"] else _split(fixed))
    return _Type(family, params if family == "decimal" else None)


def _split(match: re.Match[str]) -> tuple[str, ...]:
    return tuple(p.strip() for p in match["params"].split(","))


def _complex(kind: str, inner: str, platform: str | None) -> _Type | None:
    parts = _top_level(inner)
    members: list[tuple[str, _Type]] = []
    for part in parts:
        name, element = "", part
        if kind == "struct":
            name, _, element = part.partition(":")
            name = name.strip()
        read = _read(element, platform)
        if read is None:
            return None
        members.append((name, read))
    return _Type(kind, None, tuple(members))


def _top_level(inner: str) -> list[str]:
    """``inner`` split at the commas outside ``<…>`` and ``(…)``."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(inner):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[start:index])
            start = index + 1
    parts.append(inner[start:])
    return [p.strip() for p in parts if p.strip()]


def _shown(read: _Type) -> str:
    if read.members:
        inner = ",".join(f"{n}:{_shown(t)}" if n else _shown(t) for n, t in read.members)
        return f"{read.family}<{inner}>"
    return read.family + (f"({','.join(read.params)})" if read.params else "")


__all__ = ["FAMILIES", "PLATFORMS", "platform_of", "same_type", "type_family"]
