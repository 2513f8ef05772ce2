"""``StateStore.incident_refs``, on SQLite and PostgreSQL: every incident occurrence's issue,
whatever the state, so a report keeps linking it once the incident is acknowledged or resolved
(``watched_groups`` stops seeing the group then)."""

from __future__ import annotations

from datetime import timedelta

from mlcopilot.incidents.payload import Delivered, SinkRef
from mlcopilot.store import SqlStore
from tests.store.test_outbox_contract import T0, claim, record
from tests.store.test_store_contract import MODEL, finding

URL = "https://github.com/o/r/issues/7"


def _deliver_open(store: SqlStore) -> str:
    """Record a scan with one finding and deliver its GitHub ``open`` as issue 7."""
    record(store, [finding()], T0)
    item = claim(store, T0, sinks=["github"])
    assert item is not None
    assert item.action == "open"
    store.complete(item, Delivered(ref=SinkRef("github", "7", URL)), owner="me", now=T0)
    (incident,) = store.incidents()
    return incident.id


def test_nothing_is_known_before_a_delivery(store: SqlStore) -> None:
    record(store, [finding()], T0)
    assert store.incident_refs("github") == {}


def test_refs_stay_through_acknowledgement_and_resolution(store: SqlStore) -> None:
    incident_id = _deliver_open(store)
    expected = {(incident_id, 1): SinkRef("github", "7", URL, {})}
    assert store.incident_refs("github") == expected
    assert store.incident_refs("slack") == {}  # only the sink asked for

    store.acknowledge(incident_id, by="alice", at=T0 + timedelta(hours=1))
    assert store.watched_groups() == []  # what the report used to read: the link was lost
    assert store.incident_refs("github") == expected

    store.resolve(incident_id, at=T0 + timedelta(hours=2), reason="fixed")
    assert store.incident_refs("github") == expected


def test_each_occurrence_has_the_issue_of_its_own_group(store: SqlStore) -> None:
    incident_id = _deliver_open(store)
    # Resolved by hand without notifying: its group (issue 7) stays open, so the recurrence
    # joins it and is reported in the same issue.
    store.resolve(incident_id, at=T0 + timedelta(hours=1), reason="fixed")
    record(store, [finding()], T0 + timedelta(hours=2))
    (reopened,) = store.incidents()
    assert reopened.generation == 2
    ref = SinkRef("github", "7", URL, {})
    assert store.incident_refs("github") == {(incident_id, 1): ref, (incident_id, 2): ref}


def test_watched_groups_name_their_open_members_as_the_incidents(store: SqlStore) -> None:
    incident_id = _deliver_open(store)
    record(store, [finding(), finding("phone")], T0 + timedelta(hours=1))
    incidents = {i.id: i for i in store.incidents()}
    assert incident_id in incidents
    assert len(incidents) == 2

    (group,) = store.watched_groups()
    assert group.refs == {"github": SinkRef("github", "7", URL, {})}
    assert sorted((m.id, m.generation, m.model) for m in group.incidents) == sorted(
        (i.id, i.generation, i.model) for i in incidents.values()
    )
    # What DataHub's incident is named by: the same key as the stored incident's.
    assert {m.key for m in group.incidents} == {i.key for i in incidents.values()}
    assert store.watched_groups([MODEL]) == [group]
    assert store.watched_groups(["urn:li:mlModel:(urn:li:dataPlatform:mlflow,other,PROD)"]) == []


def test_watched_groups_of_models_hold_only_those_models_incidents(store: SqlStore) -> None:
    """A group on a shared entity is read back by each model's scan for its own incidents.

    Every batch of a full rescan read every member of the groups it touched, the estate's
    ~36,000 on a shared upstream; a member acknowledged acknowledges its group, so its own
    incidents are what a scan needs to read back.
    """
    other = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,other,PROD)"
    incident_id = _deliver_open(store)
    record(store, [finding(), finding(model=other)], T0 + timedelta(hours=1))
    ids = {i.model: i.id for i in store.incidents()}
    assert ids[MODEL] == incident_id

    (both,) = store.watched_groups()
    assert sorted(m.model for m in both.incidents) == sorted([MODEL, other])
    (mine,) = store.watched_groups([MODEL])
    assert (mine.key, mine.generation, mine.refs) == (both.key, both.generation, both.refs)
    assert [(m.id, m.model) for m in mine.incidents] == [(incident_id, MODEL)]
    (theirs,) = store.watched_groups([other])
    assert [(m.id, m.model) for m in theirs.incidents] == [(ids[other], other)]
    assert theirs.refs == {"github": SinkRef("github", "7", URL, {})}  # the group's issue
    # A group acknowledged as a whole (its issue) is read again by key: every open member.
    assert store.watched_groups(keys=[mine.key]) == [both]
    assert store.watched_groups(keys=["no such group"]) == []
