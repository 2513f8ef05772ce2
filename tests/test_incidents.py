"""The incident lifecycle: reconcile's rules, case by case, and the hand-made transitions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlcopilot.errors import UsageError
from mlcopilot.incidents.lifecycle import CLEARED, Evaluated, acknowledge, reconcile, resolve
from mlcopilot.model import (
    Finding,
    Incident,
    IncidentChanges,
    IncidentState,
    Severity,
    content_digest,
)
from mlcopilot.model.incident_heads import IncidentHeads

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
DS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
DS2 = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.orders,PROD)"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=1)

OPEN, ACK, RESOLVED = IncidentState.OPEN, IncidentState.ACKNOWLEDGED, IncidentState.RESOLVED


def finding(
    field: str | None = "email",
    *,
    entity: str = DS,
    check: str = "pii_exposure",
    severity: Severity = Severity.HIGH,
    message: str = "PII column email feeds the model",
) -> Finding:
    return Finding(
        check=check,
        severity=severity,
        model=MODEL,
        entity=entity,
        field=field,
        message=message,
        path=(MODEL, entity),
        evidence={"tags": ["urn:li:tag:pii"]},
    )


def stored(f: Finding, state: IncidentState = OPEN, generation: int = 1) -> Incident:
    """An incident as the store would hand it back, opened at T0."""
    return Incident(
        id=f.id,
        generation=generation,
        state=state,
        check=f.check,
        severity=f.severity,
        model=f.model,
        entity=f.entity,
        field=f.field,
        change=f.change,
        previous_field=f.previous_field,
        message=f.message,
        path=f.path,
        evidence=f.evidence,
        opened_at=T0,
        updated_at=T0,
        resolved_at=T0 if state is RESOLVED else None,
        acknowledged_at=T0 if state is ACK else None,
        acknowledged_by="ana" if state is ACK else None,
        resolution="fixed upstream" if state is RESOLVED else None,
    )


def everything(_model: str, _check: str, _entity: str) -> bool:
    return True


def nothing(_model: str, _check: str, _entity: str) -> bool:
    return False


F = finding()
LOUDER = dataclasses.replace(F, severity=Severity.CRITICAL, message="now in 3 features")

Outcome = tuple[str, int, IncidentState]  # id, generation, state


@dataclass(frozen=True)
class Case:
    previous: tuple[Incident, ...]
    findings: tuple[Finding, ...]
    evaluated: Evaluated
    opened: tuple[Outcome, ...] = ()
    updated: tuple[Outcome, ...] = ()
    resolved: tuple[Outcome, ...] = ()


CASES = {
    "new finding opens generation 1": Case(
        previous=(),
        findings=(F,),
        evaluated=everything,
        opened=((F.id, 1, OPEN),),
    ),
    "still there is refreshed, not reopened": Case(
        previous=(stored(F),),
        findings=(LOUDER,),
        evaluated=everything,
        updated=((F.id, 1, OPEN),),
    ),
    "acknowledged stays acknowledged": Case(
        previous=(stored(F, ACK),),
        findings=(F,),
        evaluated=everything,
        updated=((F.id, 1, ACK),),
    ),
    "gone and evaluated is resolved": Case(
        previous=(stored(F),),
        findings=(),
        evaluated=everything,
        resolved=((F.id, 1, RESOLVED),),
    ),
    "gone and acknowledged and evaluated is resolved": Case(
        previous=(stored(F, ACK),),
        findings=(),
        evaluated=everything,
        resolved=((F.id, 1, RESOLVED),),
    ),
    "gone but not evaluated is untouched": Case(
        previous=(stored(F),),
        findings=(),
        evaluated=nothing,
    ),
    "gone, only another check evaluated there, is untouched": Case(
        previous=(stored(F),),
        findings=(),
        evaluated=frozenset({(MODEL, "schema_drift", DS)}),
    ),
    "gone, same check evaluated on another entity, is untouched": Case(
        previous=(stored(F),),
        findings=(),
        evaluated=frozenset({(MODEL, "pii_exposure", DS2)}),
    ),
    "gone and evaluated, as a set, is resolved": Case(
        previous=(stored(F),),
        findings=(),
        evaluated=frozenset({(MODEL, "pii_exposure", DS)}),
        resolved=((F.id, 1, RESOLVED),),
    ),
    "resolved and back is a new generation": Case(
        previous=(stored(F, RESOLVED, generation=2),),
        findings=(F,),
        evaluated=everything,
        opened=((F.id, 3, OPEN),),
    ),
    "resolved and still gone stays as it is": Case(
        previous=(stored(F, RESOLVED),),
        findings=(),
        evaluated=everything,
    ),
    "older generations in previous do not count": Case(
        previous=(stored(F, OPEN, generation=2), stored(F, RESOLVED, generation=1)),
        findings=(F,),
        evaluated=everything,
        updated=((F.id, 2, OPEN),),
    ),
    "the same risk found twice is one incident": Case(
        previous=(),
        findings=(F, LOUDER, F),
        evaluated=everything,
        opened=((F.id, 1, OPEN),),
    ),
}


def _outcomes(incidents: tuple[Incident, ...]) -> tuple[Outcome, ...]:
    return tuple((i.id, i.generation, i.state) for i in incidents)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_reconcile(case: Case) -> None:
    changes = reconcile(case.previous, case.findings, evaluated=case.evaluated, now=NOW)
    assert _outcomes(changes.opened) == case.opened
    assert _outcomes(changes.updated) == case.updated
    assert _outcomes(changes.resolved) == case.resolved
    for incident in changes.opened + changes.updated + changes.resolved:
        assert incident.updated_at == NOW


def test_opened_incident_carries_the_finding() -> None:
    f = dataclasses.replace(
        finding("zip", check="schema_drift"), change="renamed", previous_field="postcode"
    )
    (opened,) = reconcile([], [f], evaluated=everything, now=NOW).opened
    assert opened == Incident(
        id=f.id,
        generation=1,
        state=OPEN,
        check="schema_drift",
        severity=f.severity,
        model=MODEL,
        entity=DS,
        field="zip",
        change="renamed",
        previous_field="postcode",
        message=f.message,
        path=f.path,
        evidence=f.evidence,
        opened_at=NOW,
        updated_at=NOW,
        seen_at=NOW,
    )


def test_refresh_takes_the_new_text_and_keeps_history() -> None:
    before = stored(F, ACK)
    (after,) = reconcile([before], [LOUDER], evaluated=everything, now=NOW).updated
    assert (after.severity, after.message) == (Severity.CRITICAL, "now in 3 features")
    assert (after.opened_at, after.updated_at) == (T0, NOW)
    assert (after.acknowledged_by, after.acknowledged_at) == ("ana", T0)


def test_refresh_keeps_every_field_it_does_not_take_from_the_finding() -> None:
    """A field added to Incident later is kept through a refresh, not left at its default."""
    refreshed = {"severity", "change", "previous_field", "message", "path", "evidence"}
    for state in (OPEN, ACK):
        before = stored(F, state)
        (after,) = reconcile([before], [LOUDER], evaluated=everything, now=NOW).updated
        for name in (f.name for f in dataclasses.fields(Incident)):
            expected = (
                NOW
                if name in ("updated_at", "seen_at")
                else getattr(LOUDER if name in refreshed else before, name)
            )
            assert getattr(after, name) == expected, name


def test_recurrence_starts_clean() -> None:
    (again,) = reconcile([stored(F, RESOLVED)], [F], evaluated=everything, now=NOW).opened
    assert (again.opened_at, again.resolved_at, again.resolution) == (NOW, None, None)
    assert (again.acknowledged_at, again.acknowledged_by) == (None, None)


def test_cleared_resolution() -> None:
    (gone,) = reconcile([stored(F)], [], evaluated=everything, now=NOW).resolved
    assert (gone.resolved_at, gone.resolution) == (NOW, CLEARED)
    assert CLEARED == "cleared: no longer found"


def test_an_undecided_field_keeps_its_incident_while_the_others_resolve() -> None:
    column, other, dataset = finding("amount"), finding("region"), finding(None)
    previous = [stored(column), stored(other), stored(dataset)]

    def undecided(_model: str, _check: str, _entity: str, field: str | None) -> bool:
        return field in ("amount", None)

    changes = reconcile(previous, [], evaluated=everything, now=NOW, undecided=undecided)

    assert [i.field for i in changes.resolved] == [other.field]
    assert changes.updated == ()


def test_most_severe_duplicate_wins() -> None:
    (opened,) = reconcile([], [F, LOUDER], evaluated=everything, now=NOW).opened
    assert opened.severity is Severity.CRITICAL


def test_id_is_stable_whatever_the_text_says() -> None:
    reworded = dataclasses.replace(
        F,
        message="completely different words",
        severity=Severity.LOW,
        path=(MODEL, DS2, DS),
        evidence={"other": 1},
    )
    assert reworded.id == F.id
    assert finding("phone").id != F.id
    assert finding(entity=DS2).id != F.id
    assert finding(check="stale_source").id != F.id
    assert finding(None).id != F.id
    changes = reconcile([stored(F)], [reworded], evaluated=everything, now=NOW)
    assert _outcomes(changes.updated) == ((F.id, 1, OPEN),)
    assert changes.opened == changes.resolved == ()


def test_results_are_sorted_by_id() -> None:
    fields = [f"col{n}" for n in range(12)]
    old = [finding(f"old{n}") for n in range(6)]
    kept = [finding(f"kept{n}") for n in range(6)]
    changes = reconcile(
        [stored(f) for f in old + kept],
        [finding(f) for f in reversed(fields)] + list(reversed(kept)),
        evaluated=everything,
        now=NOW,
    )
    for group in (changes.opened, changes.updated, changes.resolved):
        assert len(group) > 1
        assert [i.id for i in group] == sorted(i.id for i in group)


# --- hand-made transitions


def test_acknowledge() -> None:
    at = NOW
    acked = acknowledge(stored(F), by="  bob ", at=at)
    assert (acked.state, acked.acknowledged_by, acked.acknowledged_at, acked.updated_at) == (
        ACK,
        "bob",
        at,
        at,
    )
    assert acknowledge(acked, by="carol", at=at + timedelta(hours=1)) is acked


def test_acknowledging_a_resolved_incident_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        acknowledge(stored(F, RESOLVED), by="bob", at=NOW)
    assert str(caught.value) == (
        f"incident {F.id} is resolved (fixed upstream); only open incidents can be acknowledged"
    )


def test_acknowledging_needs_a_name() -> None:
    with pytest.raises(UsageError, match="needs a name"):
        acknowledge(stored(F), by="  ", at=NOW)


@pytest.mark.parametrize("state", [OPEN, ACK])
def test_resolve(state: IncidentState) -> None:
    before = stored(F, state)
    done = resolve(before, at=NOW, reason=" moved to the v2 table ")
    assert (done.state, done.resolved_at, done.resolution, done.updated_at) == (
        RESOLVED,
        NOW,
        "moved to the v2 table",
        NOW,
    )
    assert before.state is state  # frozen; a new object came back
    assert done.acknowledged_by == before.acknowledged_by


def test_resolving_twice_or_without_reason_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="already resolved"):
        resolve(stored(F, RESOLVED), at=NOW, reason="again")
    with pytest.raises(UsageError, match="needs a reason"):
        resolve(stored(F), at=NOW, reason="")


# --- properties


FIELDS = st.sampled_from(["a", "b", "c", "d"])
STATES = st.sampled_from([OPEN, ACK, RESOLVED])


Stored = tuple[list[Incident], list[Finding], set[str]]
"""What a scan reconciles: the stored incidents, its findings, the entities it could decide at."""


@st.composite
def scans(draw: st.DrawFn) -> Stored:
    previous = draw(st.dictionaries(FIELDS, st.tuples(STATES, st.integers(1, 4))))
    found = draw(st.sets(FIELDS))
    reworded = draw(st.sets(FIELDS))
    decided = draw(st.sets(st.sampled_from([DS, DS2])))

    def on(field: str, *, reworded: bool = False) -> Finding:
        message = "PII column still feeds it" if reworded else "PII column feeds the model"
        return finding(field, entity=DS if field < "c" else DS2, message=message)

    before = [stored(on(f), state, gen) for f, (state, gen) in previous.items()]
    now_found = [on(f, reworded=f in reworded) for f in found]
    return before, now_found, decided


def _at(decided: set[str]) -> Callable[[str, str, str], bool]:
    return lambda _model, _check, entity: entity in decided


@given(scans())
def test_reconcile_invariants(scan: Stored) -> None:
    before, findings, decided = scan
    changes = reconcile(before, findings, evaluated=_at(decided), now=NOW)
    _check_invariants(before, findings, decided, changes)


def _check_invariants(
    before: list[Incident], findings: list[Finding], decided: set[str], changes: IncidentChanges
) -> None:
    by_id = {i.id: i for i in before}
    found = {f.id for f in findings}
    opened = {i.id: i for i in changes.opened}
    updated = {i.id for i in changes.updated}
    resolved = {i.id for i in changes.resolved}
    # every finding is either new, a recurrence, or refreshed: exactly once
    assert set(opened) | updated == found
    assert not set(opened) & updated
    # what is resolved was open, is no longer found, and the scan could decide there
    for incident_id in resolved:
        assert by_id[incident_id].is_open
        assert incident_id not in found
        assert by_id[incident_id].entity in decided
    # an open incident the scan could not decide about is never touched
    for incident in before:
        if incident.is_open and incident.entity not in decided and incident.id not in found:
            assert incident.id not in resolved
    # generations only ever go up by one, and only after a resolution
    for incident_id, incident in opened.items():
        prior = by_id.get(incident_id)
        assert incident.generation == (1 if prior is None else prior.generation + 1)
        assert prior is None or not prior.is_open


@given(scans())
def test_reconciling_refreshed_incidents_from_their_heads_changes_nothing(scan: Stored) -> None:
    """As a scan reads them: whole only what a refresh will not replace, the rest as heads."""
    before, findings, decided = scan
    ids = {f.id for f in findings}
    whole = [i for i in before if not (i.is_open and i.id in ids)]
    heads = IncidentHeads.of(before)
    could = _at(decided)
    split = reconcile(whole, findings, evaluated=could, now=NOW, refreshing=heads.get)
    full = reconcile(before, findings, evaluated=could, now=NOW)
    # The same changes; only heads carry the stored digest that says one is found as stored.
    assert full.unchanged == bytes(len(full.updated))
    assert dataclasses.replace(split, unchanged=full.unchanged) == full
    stored_as = {i.id: content_digest(i) for i in before if i.is_open}
    assert split.unchanged == bytes(stored_as[i.id] == content_digest(i) for i in split.updated)


def test_a_resolved_head_is_not_refreshed() -> None:
    """Only ``previous`` says an incident recurs: a resolved head alone opens generation 1."""
    heads = IncidentHeads.of([stored(F, RESOLVED, generation=2)])
    changes = reconcile([], [F], evaluated=everything, now=NOW, refreshing=heads.get)
    assert _outcomes(changes.opened) == ((F.id, 1, OPEN),)
    assert changes.updated == ()


def test_a_scan_on_an_earlier_clock_leaves_what_a_later_scan_decided() -> None:
    """Scans of one model committed out of the order they read DataHub in (two watchers)."""
    later = NOW + timedelta(minutes=1)
    found_again = dataclasses.replace(stored(F), seen_at=later)
    opened = dataclasses.replace(stored(F), opened_at=later)
    resolved = dataclasses.replace(stored(F, RESOLVED), resolved_at=later)
    for before in (found_again, opened):
        assert reconcile([before], [], evaluated=everything, now=NOW) == IncidentChanges()
        assert reconcile([before], [LOUDER], evaluated=everything, now=NOW) == IncidentChanges()
        heads = IncidentHeads.of([before]).get
        found = reconcile([], [LOUDER], evaluated=everything, now=NOW, refreshing=heads)
        assert found == IncidentChanges()
    assert reconcile([resolved], [F], evaluated=everything, now=NOW) == IncidentChanges()
    # Seen on this scan's own clock or before: refreshed and resolved as usual.
    same = dataclasses.replace(stored(F), seen_at=NOW)
    assert len(reconcile([same], [], evaluated=everything, now=NOW).resolved) == 1
