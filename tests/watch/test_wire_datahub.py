"""``mlcopilot watch`` reading DataHub itself (the stand-in GMS), not a Lite file.

A DataHub catalog keeps what it read for its lifetime; the watcher runs for days, so each
rescan must read DataHub as it is when the event arrives, not as the previous scan saw it.
"""

from __future__ import annotations

import pytest

from standin.fixtures import StandInFactory
from testing.broker import Events
from tests.watch.test_lease import demo_records, start_watcher
from tests.watch.test_wire_watch import CUSTOMERS, MODEL, Home, publish_schema_change

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")


def test_each_rescan_reads_datahub_as_it_is_after_the_change(
    home: Home, events: Events, standin_factory: StandInFactory
) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    home.env["MLCOPILOT_CATALOG"] = f"datahub:{server.url}"
    with start_watcher(home, events) as watcher:
        assert home.drifts() == []
        # DataHub changes the schema, then GMS publishes its change events.
        server.write(demo_records("02_schema_change.json"))
        publish_schema_change(events)
        watcher.wait_until(lambda: len(home.drifts()) >= 1, "a drift incident")
        removed = [i for i in home.drifts() if i.field == "signup_date"]
        assert [(i.model, i.entity, i.change) for i in removed] == [(MODEL, CUSTOMERS, "removed")]
        assert watcher.terminate() == 0


def test_a_rescan_that_fails_says_so_and_keeps_its_request(
    home: Home, events: Events, standin_factory: StandInFactory
) -> None:
    server = standin_factory(demo_records("01_catalog.json"))
    home.env["MLCOPILOT_CATALOG"] = f"datahub:{server.url}"
    with start_watcher(home, events) as watcher:
        server.write(demo_records("02_schema_change.json"))
        server.inject("*", status=503)  # DataHub is down now
        publish_schema_change(events)
        watcher.wait_until(
            lambda: (
                "warning: watch: rescan of 1 request(s) failed, retrying in 30s" in watcher.output()
            ),
            "the failed rescan reported",
        )
        # Still asked for (with its attempt counted), never dropped: DataHub back, it retries.
        assert home.requested(MODEL)
        assert home.drifts() == []
        assert watcher.terminate() == 0
