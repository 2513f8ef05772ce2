"""The whole notification lifecycle, counted: open, repeats, evidence change, reminder, ack,
clear, recurrence — against local GitHub and Slack, on a fake clock (reliability.md T18)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.incidents.writeback import incident_urn
from mlcopilot.model import IncidentState, Severity
from testing.builders import model_urn
from testing.notify_world import CUSTOMERS, World, world

CRIT = Severity.CRITICAL


def counts(w: World) -> dict[str, int]:
    return {
        "issues": len(w.github.created()),
        "comments": len(w.github.comment_posts()),
        "closed": sum(1 for i in w.github.issues.values() if i["state"] == "closed"),
        "roots": len(w.slack.roots()),
        "replies": len(w.slack.replies()),
        "edits": len(w.slack.calls("POST", "/api/chat.update")),
    }


def test_full_lifecycle_notifies_exactly_as_the_policy_says(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", CRIT, "removed")]}}
        first = w.scan()
        assert first.relay is not None
        assert first.relay.ok
        assert counts(w) == {
            "issues": 1,
            "comments": 0,
            "closed": 0,
            "roots": 1,
            "replies": 0,
            "edits": 0,
        }
        issue = w.github.issues[1]
        assert issue["labels"][0]["name"] == "mlcopilot"
        assert "<!-- mlcopilot:group=" in issue["body"]
        assert "```mermaid" in issue["body"]
        root = w.slack.roots()[0]
        assert root["metadata"]["event_payload"]["action"] == "open"

        for _ in range(3):  # the same finding again and again: nothing new to say
            w.clock.advance(timedelta(hours=1))
            w.scan()
        assert counts(w)["comments"] == 0
        assert counts(w)["replies"] == 0

        w.clock.advance(timedelta(minutes=10))
        w.script["schema_drift"][CUSTOMERS].append(("b", CRIT, "removed"))
        w.scan()  # evidence changed: one threaded update
        assert counts(w) == {
            "issues": 1,
            "comments": 1,
            "closed": 0,
            "roots": 1,
            "replies": 1,
            "edits": 0,
        }
        assert "`b`" in w.github.comments[1][0]["body"]

        w.clock.advance(timedelta(hours=4, minutes=1))
        w.scan()  # open, unchanged, unacknowledged for the repeat interval: one reminder
        assert counts(w)["comments"] == 2
        assert counts(w)["replies"] == 2

        w.github.assign(1, "alice")  # someone takes it on GitHub
        w.clock.advance(timedelta(hours=1))
        acked = w.scan()
        assert set(acked.acks.acknowledged.values()) == {"github:@alice"}
        with w.store() as store:
            assert {i.state for i in store.incidents()} == {IncidentState.ACKNOWLEDGED}
        w.clock.advance(timedelta(hours=5))
        w.script["schema_drift"][CUSTOMERS].append(("c", CRIT, "removed"))
        w.scan()  # acknowledged: no reminder, no update
        assert counts(w)["comments"] == 2
        assert counts(w)["replies"] == 2

        w.clock.advance(timedelta(hours=1))
        w.script = {}
        w.scan()  # every finding cleared: resolve (comment + close, reply + edited root)
        assert counts(w) == {
            "issues": 1,
            "comments": 3,
            "closed": 1,
            "roots": 1,
            "replies": 3,
            "edits": 1,
        }
        assert w.github.issues[1]["state_reason"] == "completed"

        w.clock.advance(timedelta(hours=1))
        w.script = {"schema_drift": {CUSTOMERS: [("a", CRIT, "removed")]}}
        w.scan()  # recurrence after resolution: a new issue and a new thread
        assert counts(w) == {
            "issues": 2,
            "comments": 3,
            "closed": 1,
            "roots": 2,
            "replies": 3,
            "edits": 1,
        }
        assert w.github.issues[2]["state"] == "open"


def test_an_acknowledgement_in_datahub_silences_reminders(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = {"stale_source": {CUSTOMERS: [(None, Severity.HIGH, None)]}}
        w.scan()
        with w.store() as store:
            (incident,) = store.incidents()
        # Someone moves the DataHub incident to INVESTIGATION (as the UI would).
        with LiteCatalog(w.catalog_path) as catalog:
            info = catalog.nodes([incident_urn(incident)])  # exists check only
            assert info
            mcp = MetadataChangeProposalWrapper(
                entityUrn=incident_urn(incident),
                aspect=sc.IncidentInfoClass(
                    type="FRESHNESS",
                    entities=[CUSTOMERS],
                    status=sc.IncidentStatusClass(
                        state="ACTIVE",
                        stage="INVESTIGATION",
                        lastUpdated=sc.AuditStampClass(0, "urn:li:corpuser:bob"),
                    ),
                    created=sc.AuditStampClass(0, "urn:li:corpuser:bob"),
                ),
            )
            catalog.ingest([mcp])
        w.clock.advance(timedelta(hours=5))
        result = w.scan()
        assert result.acks.acknowledged == {incident.id: "datahub:investigation"}
        assert len(w.github.comment_posts()) == 0
        assert len(w.slack.replies()) == 0


def test_a_scan_of_one_model_reads_back_the_shared_groups_github_acknowledgement(
    tmp_path: Path,
) -> None:
    """Two models' incidents in one group (one issue); a scan of one model reads the issue.

    A scan reads back acknowledgements for its own models' incidents, but an issue
    acknowledged on GitHub acknowledges its whole group: the other model's incident too, at
    once, as when every model is scanned.
    """
    churn, fraud = model_urn("churn"), model_urn("fraud")
    shared = {"churn": ["raw.customers"], "fraud": ["raw.customers"]}
    with world(tmp_path, models=shared) as w:
        w.script = {"stale_source": {CUSTOMERS: [(None, Severity.HIGH, None)]}}
        w.scan()
        (number,) = w.github.issues  # one group, one issue
        w.github.assign(number, "carol")

        w.clock.advance(timedelta(hours=5))  # past the 4 h reminder
        result = w.scan(models=[churn])
        with w.store() as store:
            incidents = {i.model: i for i in store.incidents()}
        assert {incidents[m].id: "github:@carol" for m in (churn, fraud)} == (
            result.acks.acknowledged
        )
        assert {m: i.acknowledged_by for m, i in incidents.items()} == {
            churn: "github:@carol",
            fraud: "github:@carol",
        }
        assert counts(w)["comments"] == 0  # acknowledged: no reminder

        w.clock.advance(timedelta(hours=5))
        assert w.scan(models=[fraud]).acks.acknowledged == {}  # nothing left to read back
        assert counts(w)["comments"] == 0
