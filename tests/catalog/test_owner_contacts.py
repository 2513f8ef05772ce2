"""How to reach a model's owners: the same contacts from ``lite:`` and ``datahub:``.

The metadata is DataHub's file-sink JSON, as DataHub writes it: the users and groups below
(``corpUserEditableInfo`` / ``corpGroupEditableInfo`` as DataHub's UI writes them, the
``*Info`` aspects as identity-provider ingestion does) and DataHub's own sample files
(``bootstrap_mce.json``'s ``CorpUserSnapshot`` / ``CorpGroupSnapshot`` MCEs, ``ml_showcase.json``'s
owner groups). ``lite:`` reads it through ``mlcopilot catalog load``'s loader; ``datahub:``
through the stand-in GMS, which is handed the same JSON and answers DataHub's GraphQL on it.

``mcp:`` has no contacts: no ``mcp-server-datahub`` tool returns a user's or group's Slack
(the last test checks that premise against the installed server's queries).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import DataHubSettings
from mlcopilot.catalog.datahub.owners import CONTACTS
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.catalog.mcp.catalog import McpCatalog
from mlcopilot.errors import CatalogUnavailable
from mlcopilot.model import Contact, Urn
from mlcopilot.protocols import OwnerDirectory
from tests.catalog.datahub_backend import UNAVAILABLE, StandInCatalog
from tests.conftest import SAMPLES

Record = dict[str, Any]

PAYMENTS = "urn:li:corpGroup:payments-ml"
FRAUD = "urn:li:corpGroup:fraud-ml"
RISK = "urn:li:corpGroup:risk-ml"
ALICE = "urn:li:corpuser:alice"
BOB = "urn:li:corpuser:bob"
WENDY = "urn:li:corpuser:wendy"
CAROL = "urn:li:corpuser:carol"
NOBODY = "urn:li:corpuser:nobody"
NO_GROUP = "urn:li:corpGroup:nobody"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,reactivation_model_v1,PROD)"
AVATAR = (
    "https://raw.githubusercontent.com/datahub-project/datahub/master/"
    "datahub-web-react/src/images/default_avatar.png"
)


def mcp(urn: str, aspect: str, value: Record) -> Record:
    """One UPSERT in DataHub's file-sink form (what ``datahub ingest``'s file sink writes)."""
    entity_type = urn.split(":")[2]
    return {
        "entityType": entity_type,
        "entityUrn": urn,
        "changeType": "UPSERT",
        "aspectName": aspect,
        "aspect": {"json": value},
    }


def user_edits(**fields: str) -> Record:
    """``corpUserEditableInfo`` as DataHub's UI (``updateCorpUserProperties``) leaves it."""
    return {
        "teams": [],
        "skills": [],
        "pictureLink": "assets/platforms/default_avatar.png",
        **fields,
    }


RECORDS: list[Record] = [
    # Edited in DataHub (channel, list) over what the identity provider synced.
    mcp(
        PAYMENTS,
        "corpGroupEditableInfo",
        {
            "description": "Payments fraud and risk models",
            "pictureLink": AVATAR,
            "slack": "#payments-ml",
            "email": "payments-ml@example.com",
        },
    ),
    mcp(
        PAYMENTS,
        "corpGroupInfo",
        {
            "displayName": "Payments ML",
            "email": "payments-ml-ldap@example.com",
            "slack": "#payments-old",
            "admins": [ALICE],
            "members": [ALICE, BOB],
            "groups": [],
        },
    ),
    # Only what ingestion wrote: its channel id, with the whitespace a sync can leave.
    mcp(
        FRAUD,
        "corpGroupInfo",
        {
            "displayName": "Fraud ML",
            "email": "fraud-ml@example.com",
            "slack": " C0FRAUDML ",
            "admins": [],
            "members": [WENDY],
            "groups": [],
        },
    ),
    # Cleared in the UI, blank from ingestion: nothing to reach it by, named by its id.
    mcp(RISK, "corpGroupEditableInfo", {"pictureLink": AVATAR, "slack": "", "email": ""}),
    mcp(RISK, "corpGroupInfo", {"displayName": "  ", "admins": [], "members": [], "groups": []}),
    mcp(
        ALICE,
        "corpUserEditableInfo",
        user_edits(displayName="Alice Liddell", slack="U0ALICE01", email="alice@example.com"),
    ),
    mcp(
        ALICE,
        "corpUserInfo",
        {
            "customProperties": {},
            "active": True,
            "displayName": "A. Liddell",
            "email": "aliddell@corp.example.com",
            "fullName": "Alice P. Liddell",
            "system": False,
        },
    ),
    # No display name anywhere: the full name; a Slack handle, not a member id.
    mcp(BOB, "corpUserEditableInfo", user_edits(slack="bob.stone")),
    mcp(
        BOB,
        "corpUserInfo",
        {
            "customProperties": {},
            "active": True,
            "email": "bob@corp.example.com",
            "firstName": "Bob",
            "lastName": "Stone",
            "fullName": "Bob Stone",
            "system": False,
        },
    ),
    # An Enterprise Grid member id.
    mcp(WENDY, "corpUserEditableInfo", user_edits(slack="W0ENTGRID7")),
    # Held, but with neither contact aspect.
    mcp(CAROL, "status", {"removed": False}),
]

EXPECTED: dict[Urn, Contact] = {
    PAYMENTS: Contact(
        PAYMENTS, "group", "Payments ML", slack="#payments-ml", email="payments-ml@example.com"
    ),
    FRAUD: Contact(FRAUD, "group", "Fraud ML", slack="C0FRAUDML", email="fraud-ml@example.com"),
    RISK: Contact(RISK, "group", "risk-ml"),
    ALICE: Contact(ALICE, "user", "Alice Liddell", slack="U0ALICE01", email="alice@example.com"),
    BOB: Contact(BOB, "user", "Bob Stone", slack="bob.stone", email="bob@corp.example.com"),
    WENDY: Contact(WENDY, "user", "wendy", slack="W0ENTGRID7"),
    CAROL: Contact(CAROL, "user", "carol"),
    # DataHub's own samples.
    "urn:li:corpuser:datahub": Contact(
        "urn:li:corpuser:datahub", "user", "Data Hub", email="datahub@linkedin.com"
    ),
    "urn:li:corpuser:jdoe": Contact(
        "urn:li:corpuser:jdoe", "user", "John Doe", email="jdoe@linkedin.com"
    ),
    "urn:li:corpGroup:jdoe": Contact(
        "urn:li:corpGroup:jdoe", "group", "jdoe", email="jdoe@linkedin.com"
    ),
    "urn:li:corpGroup:bfoo": Contact(
        "urn:li:corpGroup:bfoo", "group", "bfoo", email="bfoo@linkedin.com"
    ),
    "urn:li:corpGroup:growth-ml": Contact("urn:li:corpGroup:growth-ml", "group", "@growth-ml"),
    "urn:li:corpGroup:ml-platform": Contact(
        "urn:li:corpGroup:ml-platform", "group", "@ml-platform"
    ),
}
ABSENT = [NOBODY, NO_GROUP, DATASET, MODEL, "urn:li:corpuser:", "not an urn"]
"""Owners DataHub holds nothing on, and urns that name no user or group."""

SAMPLE_FILES = [SAMPLES / "bootstrap_mce.json", SAMPLES / "ml_showcase.json"]
BACKENDS = ["lite", "datahub"]


def backend(
    kind: str, tmp_path: Path, records: Sequence[Record], *, samples: bool = True
) -> LiteCatalog | DataHubCatalog:
    """A catalog of ``kind`` holding ``records`` (and DataHub's sample files)."""
    sample_files = SAMPLE_FILES if samples else []
    if samples and not all(p.is_file() for p in sample_files):
        pytest.skip(f"DataHub sample files not found at {SAMPLES}")
    if kind == "lite":
        path = tmp_path / "owners.json"
        path.write_text(json.dumps(list(records)), encoding="utf-8")
        catalog = LiteCatalog(tmp_path / "lite.db", create=True)
        load_metadata_files(catalog, [path, *sample_files])
        return catalog
    if UNAVAILABLE is not None:
        pytest.skip(UNAVAILABLE)
    from standin import StandIn

    raw = [r for p in sample_files for r in json.loads(p.read_text(encoding="utf-8"))]
    server = StandIn.from_mcps([*records, *raw], tmp_path / "standin")
    server.__enter__()
    return StandInCatalog(server)


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def directory(kind: str, tmp_path: Path) -> Iterator[LiteCatalog | DataHubCatalog]:
    catalog = backend(kind, tmp_path, RECORDS)
    yield catalog
    catalog.close()


def test_contacts_are_what_datahub_records(directory: LiteCatalog | DataHubCatalog) -> None:
    asked = [*ABSENT, *reversed(EXPECTED), ALICE]  # unknowns, any order, a repeat
    found = directory.contacts(asked)
    assert found == EXPECTED
    assert list(found) == [u for u in dict.fromkeys(asked) if u in EXPECTED]


def test_nothing_asked_nothing_read(directory: LiteCatalog | DataHubCatalog) -> None:
    assert directory.contacts([]) == {}
    assert directory.contacts(ABSENT) == {}


def test_a_models_owners_are_reached_through_its_ownership(
    directory: LiteCatalog | DataHubCatalog,
) -> None:
    # ml_showcase.json: reactivation_model_v1 is owned by the growth-ml group.
    owners = directory.nodes([MODEL])[MODEL].owners
    assert owners == ("urn:li:corpGroup:growth-ml",)
    assert directory.contacts(owners) == {
        "urn:li:corpGroup:growth-ml": EXPECTED["urn:li:corpGroup:growth-ml"]
    }


@pytest.mark.parametrize(
    ("slack", "member_id"),
    [
        ("U0ALICE01", "U0ALICE01"),
        ("W0ENTGRID7", "W0ENTGRID7"),
        ("U024BE7LH", "U024BE7LH"),
        ("#payments-ml", None),  # a channel name
        ("C0GROWTHML", None),  # a channel id
        ("G0PRIVATE1", None),  # a private channel's id
        ("bob.stone", None),  # a handle
        ("@U0ALICE01", None),
        ("u0alice01", None),
        ("U0", None),  # too short
        ("U0ALICE01 x", None),
        (None, None),
    ],
)
def test_only_a_member_id_is_a_member_id(slack: str | None, member_id: str | None) -> None:
    assert Contact(ALICE, "user", "Alice", slack=slack).slack_member_id == member_id


def test_a_batch_of_500_owners(kind: str, tmp_path: Path) -> None:
    users = [f"urn:li:corpuser:user{i:03d}" for i in range(500)]
    records = [
        mcp(
            urn,
            "corpUserEditableInfo",
            user_edits(displayName=f"User {i}", slack=f"U0{i:07d}", email=f"user{i}@example.com"),
        )
        for i, urn in enumerate(users)
    ]
    catalog = backend(kind, tmp_path, records, samples=False)
    try:
        if isinstance(catalog, StandInCatalog):
            catalog.server.clear_requests()
        unknown = [f"urn:li:corpuser:ghost{i}" for i in range(25)]
        found = catalog.contacts([*users, *unknown])
        assert list(found) == users
        assert found[users[7]] == Contact(
            users[7], "user", "User 7", slack="U00000007", email="user7@example.com"
        )
        assert all(c.slack_member_id == c.slack for c in found.values())
        if isinstance(catalog, StandInCatalog):
            # 525 owners: two `entities` queries of up to 500, never one per owner.
            asked = [r for r in catalog.server.requests if r.operation == "mlcopilotContacts"]
            assert len(asked) == 2
            assert len(catalog.server.requests) == 2
    finally:
        catalog.close()


@pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")
def test_contacts_are_held_to_the_scans_deadline(tmp_path: Path) -> None:
    catalog = backend("datahub", tmp_path, RECORDS, samples=False)
    assert isinstance(catalog, StandInCatalog)
    try:
        catalog.server.inject("mlcopilotContacts", hang=True)
        catalog.walk_until(time.monotonic() + 1.0)
        started = time.monotonic()
        with pytest.raises(CatalogUnavailable, match="mlcopilotContacts"):
            catalog.contacts([ALICE, PAYMENTS])
        assert time.monotonic() - started < 4  # the call's own budget would be 10 s
        catalog.walk_until(time.monotonic() - 1)
        catalog.server.clear_requests()
        with pytest.raises(CatalogUnavailable, match="not made"):
            catalog.contacts([ALICE])
        assert catalog.server.requests == []
    finally:
        catalog.close()


@pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")
def test_the_query_is_datahubs_graphql() -> None:
    from graphql import parse, validate

    from standin.sdl import load_schema

    assert validate(load_schema(), parse(CONTACTS)) == []


def test_which_backends_are_owner_directories(tmp_path: Path) -> None:
    lite = LiteCatalog(tmp_path / "none.db")
    remote = DataHubCatalog("http://127.0.0.1:9")
    mcp_catalog = McpCatalog(DataHubSettings(server="http://127.0.0.1:9", token=None))
    try:
        directory: OwnerDirectory = lite
        assert isinstance(directory, OwnerDirectory)
        assert isinstance(remote, OwnerDirectory)
        assert not isinstance(mcp_catalog, OwnerDirectory)
    finally:
        for catalog in (lite, remote, mcp_catalog):
            catalog.close()
    # Why not mcp: no query mcp-server-datahub sends selects a user's or group's Slack.
    package = Path(str(files("mcp_server_datahub")))
    sources = [*package.rglob("*.gql"), *package.rglob("*.py")]
    text = "".join(p.read_text(encoding="utf-8") for p in sources)
    assert "... on CorpGroup" in text
    assert "slack" not in text.lower()
