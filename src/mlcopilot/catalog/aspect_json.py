"""Validate and normalise aspect JSON against the SDK's Avro schemas without building objects.

The SDK's own path (``from_obj`` + ``validate`` + ``to_obj``) costs about 1 ms per aspect, which
is what made loading a large file take minutes. This module compiles, once per aspect class, a
function that checks a file-sink ``json`` payload against the class's Avro schema and returns
the JSON the SDK round trip would have produced (``pre_json_transform(cls.from_obj(
post_json_transform(payload)).to_obj())``): fields in schema order, defaults filled in, nulls and
unknown fields dropped, ambiguous unions wrapped in ``{"com.linkedin.<type>": ...}``.

It only answers what it is sure of. Anything it is not sure about, or anything invalid, raises
:class:`NotFast`, and the caller takes the SDK's path, which decides (and words the error). So the
fast path can be wrong only by being slow; ``tests/catalog/test_aspect_json.py`` checks that it
agrees with the SDK on every aspect of DataHub's golden files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from avro import schema as avro_schema
from avrogen.avrojson import AvroJsonConverter
from avrogen.dict_wrapper import DictWrapper
from datahub.emitter.serialization_helper import pre_json_transform

_Normalise = Callable[[Any], Any]
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_SDK_PREFIX, _FILE_PREFIX = "com.linkedin.pegasus2avro.", "com.linkedin."
_SCALARS = {"string": (str,), "boolean": (bool,), "float": (int, float), "double": (int, float)}
"""Avro primitives checked by the Python type alone (the SDK accepts exactly these types)."""


class NotFast(Exception):
    """The fast path cannot vouch for this value; use the SDK's path."""


def normalise(cls: type[DictWrapper], payload: Any) -> dict[str, Any]:
    """The JSON the SDK's round trip makes of ``payload`` as a ``cls``.

    Raises:
        NotFast: when the payload is invalid or uses a form this module does not handle.
    """
    result: dict[str, Any] = _compiled(cls).check(payload)
    return result


def dumps(cls: type[DictWrapper], value: dict[str, Any]) -> str:
    """``json.dumps(value)`` (the text Lite stores) of a ``cls`` value in the SDK's JSON form.

    ``value`` is what :func:`normalise` (or the SDK's ``to_obj``) made of a payload: msgspec
    encodes it and formats the text with ``json.dumps``'s separators, four times faster. The
    two write the same text for ASCII without DEL (every other ASCII character is escaped
    alike; msgspec writes the rest as UTF-8) and for floats not written in a notation of
    msgspec's own (:func:`_floats_as_repr`); for anything else, ``json.dumps`` writes it.
    """
    try:
        encoded = _FORMAT(_ENCODE(value), indent=0)
    except (msgspec.MsgspecError, OverflowError, TypeError, ValueError):
        return json.dumps(value)  # a lone surrogate (from a "value" text aspect), say
    if (
        encoded.isascii()
        and b"\x7f" not in encoded
        and (_compiled(cls).float_free or _floats_as_repr(encoded))
    ):
        return encoded.decode("ascii")
    return json.dumps(value)


def _floats_as_repr(encoded: bytes) -> bool:
    """Whether msgspec wrote every float of ``encoded`` as ``json.dumps`` would (``repr``).

    Both write the shortest digits that read back as the same float; msgspec differs in
    writing exponents (``1e16``, not ``1e+16``), numbers in [1e-5, 1e-4) without one
    (``0.00001``, not ``1e-05``) and NaN and infinities as ``null``. Text with no digit
    followed by an ``e``, no ``0.0000`` and no ``null`` value has none of those (strings can
    make this answer no where nothing differs: ``json.dumps`` then writes the text).
    """
    return (
        b"0.0000" not in encoded
        and b"0e" not in encoded.translate(_DIGITS_AND_E)
        and b": null" not in encoded
        and b"[null" not in encoded
        and b", null" not in encoded
    )


_ENCODE = msgspec.json.Encoder().encode
_FORMAT = msgspec.json.format
_DIGITS_AND_E = bytes(
    0x30 if 0x30 <= byte <= 0x39 else 0x65 if byte in b"eE" else 0x20 for byte in range(256)
)
"""``bytes.translate`` table: ASCII digits to ``0``, ``e`` and ``E`` to ``e``, others to spaces."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    check: _Normalise
    float_free: bool
    """No ``float`` or ``double`` in the schema: no value of the class holds a float."""


def _compiled(cls: type[DictWrapper]) -> _Compiled:
    compiled = _COMPILED.get(cls)
    if compiled is None:
        compiler = _Compiler(cls._get_json_converter())
        check = compiler.compile(cls.RECORD_SCHEMA, within_array=False)
        compiled = _COMPILED[cls] = _Compiled(check, float_free=not compiler.floats)
    return compiled


_COMPILED: dict[type[DictWrapper], _Compiled] = {}
"""One compiled check per class (a few hundred classes at most), built on first use."""


class _Compiler:
    def __init__(self, converter: AvroJsonConverter) -> None:
        self._converter: Any = converter  # avrogen is untyped
        self._records: dict[str, _Normalise] = {}
        self.floats = False
        """Whether a ``float`` or ``double`` was compiled (every type a value can hold is)."""

    def compile(self, schema: Any, *, within_array: bool) -> _Normalise:
        kind = schema.type
        if kind in ("float", "double"):
            self.floats = True
        if kind == "record":
            return self._record(schema)
        if kind == "union":
            return self._union(schema, within_array=within_array)
        if kind == "array":
            return _array(self.compile(schema.items, within_array=True))
        if kind == "map":
            return _map(self.compile(schema.values, within_array=False))
        if kind == "enum":
            return _enum(frozenset(schema.symbols))
        if kind == "string":
            return _string
        if kind == "boolean":
            return _boolean
        if kind in ("int", "long"):
            return _integer(*(_INT_RANGE if kind == "int" else _LONG_RANGE))
        if kind in ("float", "double"):
            return _number
        if kind == "null":
            return _null
        return _unsure  # bytes, fixed: not in DataHub's JSON aspects as far as we load them

    def _record(self, schema: Any) -> _Normalise:
        name = schema.fullname
        if name in self._records:
            return self._records[name]
        # Recursive schemas refer to themselves: register a forwarder before compiling fields.
        slot: list[_Normalise] = []
        self._records[name] = lambda value: slot[0](value)
        if any(f.name == "fieldDiscriminator" for f in schema.fields):
            # Unions with aliases get special treatment in the SDK's transforms: leave to it.
            slot.append(_unsure)
            return self._records[name]
        fields = [
            (f.name, f.type, self.compile(f.type, within_array=False), self._missing(f))
            for f in schema.fields
        ]
        # An optional scalar written bare (the most common field of all) is checked inline too.
        optional_scalars = {f.name: self._bare_scalars(f.type) for f in schema.fields}
        slot.append(_record(schema.name, fields, optional_scalars))
        # Later references use the function itself; only recursive ones go through the slot.
        self._records[name] = slot[0]
        return slot[0]

    def _bare_scalars(self, schema: Any) -> tuple[type, ...]:
        """The Python types of a ``[null, scalar]`` union's value, when the SDK writes it bare."""
        if schema.type != "union" or not self._converter._is_unambiguous_union(schema):
            return ()
        others = [m for m in schema.schemas if m.type != "null"]
        return _SCALARS.get(others[0].type, ()) if len(others) == 1 else ()

    def _missing(self, field: Any) -> Callable[[], Any] | None:
        """What the SDK writes for ``field`` when the payload leaves it out (or null).

        None when it leaves the field out too; else a function giving the value (a fresh copy
        of a default object, since callers may keep the result) or raising :class:`NotFast`.
        """
        if field.has_default:
            parsed = self._converter.from_json_object(field.default, field.type)
            value = pre_json_transform(self._converter._generic_to_json(parsed, field.type))
            if value is None:
                return None
            text = json.dumps(value)
            if isinstance(value, dict | list):
                return lambda: json.loads(text)
            return lambda: value
        if _nullable(field.type):
            return None
        return _missing_required

    def _union(self, schema: Any, *, within_array: bool) -> _Normalise:
        members = schema.schemas
        has_null = any(m.type == "null" for m in members)
        others = [m for m in members if m.type != "null"]
        bare = not within_array and self._converter._is_unambiguous_union(schema)
        if len(others) == 1:
            only = others[0]
            inner = self.compile(only, within_array=False)
            key = _file_key(self._converter._fullname(only))
            names = {self._converter._fullname(m) for m in members}
            scalars = _SCALARS.get(only.type, ())
            return _single_union(inner, _sdk_key(key), names, has_null, bare, key, scalars)
        records = {
            _file_key(m.fullname): self.compile(m, within_array=False)
            for m in others
            if m.type == "record"
        }
        return _multi_union(records, has_null)


def _file_key(sdk_name: str) -> str:
    """The union key as the file sink writes it (``com.linkedin.`` rather than pegasus2avro)."""
    if sdk_name.startswith(_SDK_PREFIX):
        return _FILE_PREFIX + sdk_name[len(_SDK_PREFIX) :]
    return sdk_name


def _sdk_key(file_key: str) -> str:
    if file_key.startswith(_FILE_PREFIX):
        return _SDK_PREFIX + file_key[len(_FILE_PREFIX) :]
    return file_key


def _as_sdk(key: str) -> str:
    """What the SDK's ``post_json_transform`` makes of a one-key object's key."""
    return _SDK_PREFIX + key[len(_FILE_PREFIX) :] if key.startswith(_FILE_PREFIX) else key


def _nullable(schema: Any) -> bool:
    return isinstance(schema, avro_schema.UnionSchema) and any(
        m.type == "null" for m in schema.schemas
    )


def _missing_required() -> Any:
    raise NotFast("missing required field")


def _unsure(value: Any) -> Any:
    raise NotFast("not handled by the fast path")


def _record(
    name: str,
    fields: list[tuple[str, Any, _Normalise, Any]],
    optional_scalars: dict[str, tuple[type, ...]],
) -> _Normalise:
    """A record's check as one generated function.

    A field of a primitive type (or an optional one) is checked inline, any other field by
    its compiled check.

    Records are most of the work (a schema field alone has 20 fields), and a call per field
    cost half the time of a load's validation.
    """
    scope: dict[str, Any] = {"NotFast": NotFast}
    lines = [
        "def check(value):",
        "    if type(value) is not dict:",
        "        raise NotFast('expected an object')",
        "    out = {}",
        "    get = value.get",
    ]
    for index, (field, schema, check, missing) in enumerate(fields):
        key = repr(field)
        lines += [f"    v = get({key})", "    if v is not None:"]
        inline = _inline(index, key, schema, check, scope, optional_scalars[field])
        lines += ["        " + line for line in inline]
        if missing is _missing_required:
            lines += ["    else:", "        raise NotFast('missing required field')"]
        elif missing is not None:
            scope[f"default_{index}"] = missing
            lines += ["    else:", f"        out[{key}] = default_{index}()"]
    lines.append("    return out")
    exec(compile("\n".join(lines), f"<aspect_json {name}>", "exec"), scope)
    generated: _Normalise = scope["check"]
    return generated


def _inline(
    index: int,
    key: str,
    schema: Any,
    check: _Normalise,
    scope: dict[str, Any],
    optional_scalars: tuple[type, ...],
) -> list[str]:
    """Source lines checking ``v`` (not None) for one field and storing the result."""
    kind = schema.type
    if optional_scalars:
        # The value itself when it is of the scalar's type; anything else (a {type: value}
        # form, a wrong type) goes through the union's own check.
        scope[f"check_{index}"] = check
        types = " or ".join(f"type(v) is {t.__name__}" for t in optional_scalars)
        return [
            f"if {types}:",
            f"    out[{key}] = v",
            "else:",
            f"    out[{key}] = check_{index}(v)",
        ]
    if kind in _SCALARS:
        types = " and ".join(f"type(v) is not {t.__name__}" for t in _SCALARS[kind])
        return [f"if {types}:", "    raise NotFast('wrong type')", f"out[{key}] = v"]
    if kind in ("int", "long"):
        low, high = _INT_RANGE if kind == "int" else _LONG_RANGE
        return [
            f"if type(v) is not int or not {low} <= v <= {high}:",
            "    raise NotFast('expected an integer in range')",
            f"out[{key}] = v",
        ]
    if kind == "enum":
        scope[f"symbols_{index}"] = frozenset(schema.symbols)
        return [
            f"if type(v) is not str or v not in symbols_{index}:",
            "    raise NotFast('not a symbol of the enum')",
            f"out[{key}] = v",
        ]
    scope[f"check_{index}"] = check
    return [f"r = check_{index}(v)", "if r is not None:", f"    out[{key}] = r"]


def _array(item: _Normalise) -> _Normalise:
    def normalise_array(value: Any) -> Any:
        if type(value) is not list:
            raise NotFast("expected a list")
        return [item(v) for v in value]

    return normalise_array


def _map(item: _Normalise) -> _Normalise:
    def normalise_map(value: Any) -> Any:
        if type(value) is not dict:
            raise NotFast("expected an object")
        if None in value.values():
            raise NotFast("null in a map")  # the SDK drops those keys: leave that to it
        return {k: item(v) for k, v in value.items()}

    return normalise_map


def _single_union(
    inner: _Normalise,
    sdk_key: str,
    names: set[str],
    has_null: bool,
    bare: bool,
    key: str,
    scalars: tuple[type, ...],
) -> _Normalise:
    def normalise_optional(value: Any) -> Any:
        if type(value) in scalars:  # the usual optional string or flag: no call further down
            return value if bare else {key: value}
        if value is None:
            if has_null:
                return None
            raise NotFast("null where a value is required")
        if type(value) is dict and len(value) == 1:
            (given,) = value
            given_sdk = _as_sdk(given)
            if given_sdk == sdk_key:
                value = value[given]
            elif given_sdk in names:
                raise NotFast("union member named explicitly")
        result = inner(value)
        return result if bare else {key: result}

    return normalise_optional


def _multi_union(records: dict[str, _Normalise], has_null: bool) -> _Normalise:
    def normalise_union(value: Any) -> Any:
        if value is None:
            if has_null:
                return None
            raise NotFast("null where a value is required")
        if type(value) is dict and len(value) == 1:
            (given,) = value
            check = records.get(given)
            if check is not None:
                return {given: check(value[given])}
        raise NotFast("union value not in the {type: value} form")

    return normalise_union


def _enum(symbols: frozenset[str]) -> _Normalise:
    def normalise_enum(value: Any) -> Any:
        if type(value) is str and value in symbols:
            return value
        raise NotFast("not a symbol of the enum")

    return normalise_enum


def _string(value: Any) -> Any:
    if type(value) is str:
        return value
    raise NotFast("expected a string")


def _boolean(value: Any) -> Any:
    if type(value) is bool:
        return value
    raise NotFast("expected a boolean")


def _integer(low: int, high: int) -> _Normalise:
    def normalise_integer(value: Any) -> Any:
        if type(value) is int and low <= value <= high:
            return value
        raise NotFast("expected an integer in range")

    return normalise_integer


def _number(value: Any) -> Any:
    if type(value) is int or type(value) is float:
        return value
    raise NotFast("expected a number")


def _null(value: Any) -> Any:
    if value is None:
        return None
    raise NotFast("expected null")
