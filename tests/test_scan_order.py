"""Two scans of one model committed out of the order they read DataHub in.

Scan A reads DataHub; then scan B reads it after a change and commits first; then A commits
what it read before the change. Two watchers sharing a state database get there when one scans
a full rescan's batch holding a model and the other scans that model for an event that came
meanwhile (the event's request is a row of its own, not the batch's, so the rule that a model
asked for again while it is scanned is scanned again does not cover it). A's clock is checked
only when it starts (``scan.selection.check_clock``), and on a conflict it reconciles the same
findings against the newer state. Before ``lifecycle._changed_after``, A undid what B decided:
it resolved the incident B had just opened (at a time before B opened it) or opened again the
one B had just resolved, and people heard of it twice. Now A leaves alone every incident opened
or resolved on a later clock than its own, and (since ``Incident.seen_at``) every incident B
found again: open before both scans, no longer found by A's older read, found by B's newer one.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from mlcopilot.model import Incident, IncidentState, Severity
from testing.notify_world import CUSTOMERS, Script, World, world

PII: Script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}


def scan_a_with_b_committing_first(w: World, *, a_read: Script, b_reads: Script) -> list[Incident]:
    """Scan A on ``a_read``; B, an hour and a minute later, on ``b_reads``, commits before A."""
    w.clock.advance(timedelta(hours=1))
    b_ran: list[bool] = []

    def scan_b_commits_first(point: str) -> None:
        if point != "before_commit" or b_ran:
            return
        b_ran.append(True)
        w.clock.advance(timedelta(minutes=1))
        w.script = b_reads
        w.scan(deliver=False)

    w.script = a_read
    w.scan(deliver=False, failpoint=scan_b_commits_first)
    assert b_ran
    with w.store() as store:
        return store.incidents()


def test_a_scan_leaves_open_what_a_fresher_scan_opened_meanwhile(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.scan(deliver=False)
        (incident,) = scan_a_with_b_committing_first(w, a_read={}, b_reads=PII)
        assert incident.state == IncidentState.OPEN


def test_a_scan_leaves_resolved_what_a_fresher_scan_resolved_meanwhile(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.scan(deliver=False)
        (incident,) = scan_a_with_b_committing_first(w, a_read=PII, b_reads={})
        assert (incident.state, incident.generation) == (IncidentState.RESOLVED, 1)


def test_a_scan_leaves_open_what_a_fresher_scan_found_again_meanwhile(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.scan(deliver=False)
        (incident,) = scan_a_with_b_committing_first(w, a_read={}, b_reads=PII)
        assert (incident.state, incident.generation) == (IncidentState.OPEN, 1)
        assert incident.seen_at is not None
        assert incident.seen_at > incident.opened_at
