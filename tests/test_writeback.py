"""Write-back planning: deterministic urns, tags shared across models, a readable document."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY, plan_writeback
from mlcopilot.model import (
    DocumentWrite,
    Incident,
    IncidentState,
    IncidentWrite,
    PropertyWrite,
    Severity,
    TagWrite,
)

INFOS = builtin_infos()
TAGS = {name: info.tag for name, info in INFOS.items()}

A = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,a,PROD)"
B = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,b,PROD)"
RAW = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def incident(
    model: str = A, *, state: IncidentState = IncidentState.OPEN, id: str = "aaaa"
) -> Incident:
    return Incident(
        id=id,
        generation=1,
        state=state,
        check="pii_exposure",
        severity=Severity.HIGH,
        model=model,
        entity=RAW,
        field="email",
        change=None,
        previous_field=None,
        message="column `email` is tagged PII and feeds the model",
        path=(model, RAW),
        evidence={"tags": "urn:li:tag:PII"},
        opened_at=T0,
        updated_at=T0,
        resolved_at=T0 if state is IncidentState.RESOLVED else None,
    )


def test_plan_is_deterministic_and_names_the_incident() -> None:
    plan = plan_writeback([incident()], models=[A], everything=[incident()], infos=INFOS)
    assert plan == plan_writeback([incident()], models=[A], everything=[incident()], infos=INFOS)
    native = next(w for w in plan if isinstance(w, IncidentWrite))
    assert native.urn == "urn:li:incident:mlcopilot-aaaa-1"
    assert native.incident_type == "CUSTOM"
    assert native.custom_type == "PII_EXPOSURE"
    assert native.priority == 1
    assert native.entities == (RAW, A)
    assert native.active
    document = next(w for w in plan if isinstance(w, DocumentWrite))
    assert document.urn == "urn:li:document:mlcopilot-aaaa-1"
    assert "## Suggested action" in document.text
    assert f"`{RAW}`" in document.text
    assert TagWrite(RAW, TAGS["pii_exposure"], present=True) in plan
    summary = next(w for w in plan if isinstance(w, PropertyWrite))
    assert summary == PropertyWrite(A, OPEN_RISKS_PROPERTY, ("pii_exposure: 1 open, worst high",))


def test_resolution_removes_the_tag_unless_another_model_still_needs_it() -> None:
    resolved = incident(state=IncidentState.RESOLVED)
    alone = plan_writeback([resolved], models=[A], everything=[resolved], infos=INFOS)
    assert TagWrite(RAW, TAGS["pii_exposure"], present=False) in alone
    assert PropertyWrite(A, OPEN_RISKS_PROPERTY, ("none",)) in alone
    native = next(w for w in alone if isinstance(w, IncidentWrite))
    assert not native.active
    other = incident(B, id="bbbb")
    shared = plan_writeback([resolved], models=[A], everything=[resolved, other], infos=INFOS)
    assert TagWrite(RAW, TAGS["pii_exposure"], present=True) in shared


def test_timestamps_come_from_the_incident_not_the_clock() -> None:
    later = replace(incident(), updated_at=datetime(2026, 11, 9, tzinfo=UTC))
    assert plan_writeback([incident()], models=[A], everything=[], infos=INFOS) == plan_writeback(
        [later], models=[A], everything=[], infos=INFOS
    )


def test_a_tag_held_by_a_kind_another_model_has_open_stays() -> None:
    """``held`` (the kinds others hold open, as a scan asks the store) is ``everything``'s say."""
    resolved = incident(state=IncidentState.RESOLVED)
    other = incident(B, id="bbbb")
    from_incidents = plan_writeback(
        [resolved], models=[A], everything=[resolved, other], infos=INFOS
    )
    from_kinds = plan_writeback(
        [resolved], models=[A], everything=[resolved], held={(RAW, "pii_exposure")}, infos=INFOS
    )
    assert from_kinds == from_incidents
    assert TagWrite(RAW, TAGS["pii_exposure"], present=True) in from_kinds
    elsewhere = plan_writeback(
        [resolved], models=[A], everything=[resolved], held={(RAW, "stale_source")}, infos=INFOS
    )
    assert TagWrite(RAW, TAGS["pii_exposure"], present=False) in elsewhere
