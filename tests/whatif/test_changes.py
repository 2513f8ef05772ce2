"""The change set: flags parsed and checked, applied to a schema, derived from a proposed one."""

from __future__ import annotations

import pytest

from mlcopilot.errors import UsageError
from mlcopilot.model import Deprecation, Schema, SchemaField
from mlcopilot.scan.whatif import apply_to_schema, derive_changes, parse_changes
from mlcopilot.scan.whatif.changes import logical_type_of

CURRENT = Schema(
    (
        SchemaField("id", "NumberType", "bigint", "The key", 0),
        SchemaField("email", "StringType", "varchar", "Contact", 1, tags=frozenset({"t:PII"})),
        SchemaField("age", "NumberType", "int", "", 2),
        SchemaField("country", "StringType", "varchar", "Where they live", 3),
    )
)


def paths(schema: Schema | None) -> list[str]:
    assert schema is not None
    return [f.path for f in schema.fields]


def test_each_flag_becomes_its_change() -> None:
    changes = parse_changes(
        drop=["age"], rename=["email=contact"], retype=["id=string"], deprecation=Deprecation()
    )
    assert [(c.kind, c.column, c.new_name, c.new_type) for c in changes.columns] == [
        ("dropped", "age", None, None),
        ("renamed", "email", "contact", None),
        ("retyped", "id", None, "string"),
    ]
    assert changes.deprecation == Deprecation()
    assert changes.describe() == [
        "drop age",
        "rename email to contact",
        "retype id to string",
        "deprecate",
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"rename": ["email"]}, "--rename 'email': expected OLD=NEW"),
        ({"rename": ["=x"]}, "the column name is empty"),
        ({"rename": ["a=a"]}, "the old and the new name are the same"),
        ({"retype": ["age"]}, "--retype 'age': expected COLUMN=TYPE"),
        ({"retype": ["age="]}, "the column name is empty"),
        ({"drop": [" "]}, "the column name is empty"),
        ({"drop": ["age"], "retype": ["age=string"]}, "column 'age' is changed twice"),
        ({"rename": ["a=x", "b=x"]}, "two columns would both be named 'x'"),
    ],
)
def test_bad_flags_say_what_is_wrong(flags: dict[str, list[str]], message: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_changes(**flags)  # type: ignore[arg-type]
    assert message in str(raised.value)


def test_applied_changes_keep_each_columns_annotations_and_renumber() -> None:
    changes = parse_changes(drop=["age"], rename=["email=contact"], retype=["id=string"])
    after = apply_to_schema(CURRENT, changes, where="t")
    assert after is not None
    assert paths(after) == ["id", "contact", "country"]
    contact = after.by_path()["contact"]
    assert contact.tags == frozenset({"t:PII"})  # a renamed column keeps its annotations
    assert contact.description == "Contact"
    assert [f.position for f in after.fields] == [0, 1, 2]
    retyped = after.by_path()["id"]
    assert (retyped.type, retyped.native_type) == ("StringType", "string")


def test_retype_to_a_logical_type_or_an_unknown_native_one() -> None:
    logical = apply_to_schema(CURRENT, parse_changes(retype=["age=StringType"]), where="t")
    assert logical is not None
    assert (logical.by_path()["age"].type, logical.by_path()["age"].native_type) == (
        "StringType",
        "",
    )
    unknown = apply_to_schema(CURRENT, parse_changes(retype=["age=geography"]), where="t")
    assert unknown is not None
    # An unknown native type keeps the logical one: the native type still shows the change.
    assert (unknown.by_path()["age"].type, unknown.by_path()["age"].native_type) == (
        "NumberType",
        "geography",
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"drop": ["agee"]}, "drop agee: t has no column 'agee'; did you mean age?"),
        ({"drop": ["zzz"]}, "its columns: id, email, age, country"),
        ({"rename": ["age=email"]}, "rename to email: t already has a column 'email'"),
        ({"retype": ["age=int"]}, "retype age to int: it already is int"),
        ({"retype": ["age=NumberType"]}, "it already is int"),
    ],
)
def test_changes_the_schema_refuses(flags: dict[str, list[str]], message: str) -> None:
    with pytest.raises(UsageError) as raised:
        apply_to_schema(CURRENT, parse_changes(**flags), where="t")  # type: ignore[arg-type]
    assert message in str(raised.value)


def test_a_rename_onto_a_column_dropped_or_moved_away_is_allowed() -> None:
    changes = parse_changes(drop=["email"], rename=["country=email"])
    assert paths(apply_to_schema(CURRENT, changes, where="t")) == ["id", "age", "email"]


def test_column_changes_need_a_schema_deprecation_does_not() -> None:
    with pytest.raises(UsageError, match="t has no schema in the catalog"):
        apply_to_schema(None, parse_changes(drop=["a"]), where="t")
    assert apply_to_schema(None, parse_changes(deprecation=Deprecation()), where="t") is None


def test_derived_changes_and_the_rename_rule() -> None:
    proposed = Schema(
        (
            SchemaField("id", "StringType", "varchar", "The key", 0),  # retyped
            # email -> contact_email: same type, same position: a rename
            SchemaField("contact_email", "StringType", "varchar", "", 1),
            # country -> nation at another position, same description: a rename
            SchemaField("nation", "StringType", "varchar", "Where they live", 2),
            # age dropped; score added (a number, like age, but neither position nor text)
            SchemaField("score", "NumberType", "int", "", 3),
        )
    )
    changes = derive_changes(CURRENT, proposed, source="f.json")
    assert changes.describe() == [
        "retype id to varchar",
        "rename email to contact_email",
        "drop age",
        "rename country to nation",
        "add score (int)",
    ]
    assert changes.schema is proposed
    assert apply_to_schema(CURRENT, changes, where="t") is proposed


def test_no_rename_without_the_same_type() -> None:
    proposed = Schema((SchemaField("id", "NumberType", "bigint", "The key", 0),))
    changes = derive_changes(
        Schema((SchemaField("x", "StringType", "varchar", "", 0),)), proposed, source="f"
    )
    assert changes.describe() == ["drop x", "add id (bigint)"]


@pytest.mark.parametrize(
    ("native", "logical"),
    [
        ("varchar(20)", "StringType"),
        ("BIGINT", "NumberType"),
        ("decimal(10,2)", "NumberType"),
        ("timestamp_ntz", "TimeType"),
        ("date", "DateType"),
        ("boolean", "BooleanType"),
        ("array<string>", "ArrayType"),
        ("geography", None),
    ],
)
def test_logical_types_of_native_ones(native: str, logical: str | None) -> None:
    assert logical_type_of(native) == logical
