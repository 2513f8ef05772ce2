"""The benchmark's stand-in served by several processes: every one answers, reads only.

The shared rescan's benchmark serves DataHub from two processes (as GMS serves on all its
cores); its figures are only worth something if the processes share the requests, the merged
figures count each request once, and a write (which one process's index would hold and the
other's not) is refused rather than half-applied.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from benchmarks.run import clear_stats, serving, stats
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from testing.broker import children_of, proc_stat
from tests.conftest import DEMO_DATA

pytestmark = pytest.mark.slow  # three stand-in processes start

PROPOSAL = {
    "proposal": {
        "entityType": "dataset",
        "entityUrn": "urn:li:dataset:(urn:li:dataPlatform:hive,raw.new,PROD)",
        "changeType": "UPSERT",
        "aspectName": "status",
        "aspect": {"contentType": "application/json", "value": json.dumps({"removed": False})},
    }
}


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "catalog.db"
    with LiteCatalog(path, create=True) as catalog:
        load_metadata_files(catalog, [DEMO_DATA / "01_catalog.json"])
    return path


def connect(url: str) -> http.client.HTTPConnection:
    address = urlsplit(url)
    assert address.hostname is not None
    return http.client.HTTPConnection(address.hostname, address.port, timeout=10)


def get_config(connection: http.client.HTTPConnection) -> int:
    connection.request("GET", "/config")
    response = connection.getresponse()
    response.read()
    return response.status


def ingest(url: str) -> tuple[int, str]:
    """Write one aspect through ``ingestProposal``: the status and the body."""
    connection = connect(url)
    try:
        connection.request(
            "POST",
            "/aspects?action=ingestProposal",
            body=json.dumps(PROPOSAL),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_two_processes_share_the_work_refuse_writes_and_stop_together(lite: Path) -> None:
    with serving(lite, 0.0, processes=2) as two:
        children = children_of(int(two["pid"]))
        clear_stats(two["control"])
        # The kernel hands each connection to one process, by its address: 40 reach both.
        for _ in range(40):
            connection = connect(two["url"])
            try:
                assert get_config(connection) == 200
            finally:
                connection.close()
        figures = stats(two["control"])
        assert figures["requests"] == 40
        assert figures["by_operation"] == {"GET /config": 40}
        assert sorted(figures["requests_by_process"])[0] > 0
        assert sum(figures["requests_by_process"]) == 40
        assert 0 < figures["handler_busy_s"] <= figures["handler_s"] + 1e-6  # a union of spans

        clear_stats(two["control"])
        assert stats(two["control"])["requests"] == 0

        # A write one process's index would hold and the other's not: refused, counted.
        status, body = ingest(two["url"])
        assert status == 500, body
        assert stats(two["control"])["errors"] == 1
    # Every process stopped with the stand-in: none is left serving the port.
    assert len(children) == 2
    left = [pid for pid in children if (fields := proc_stat(pid)) is not None and fields[0] != "Z"]
    assert left == []


def test_one_process_still_writes(lite: Path) -> None:
    """Only a stand-in of several processes is read-only: one process's index is the file's."""
    with serving(lite, 0.0) as server:
        status, body = ingest(server["url"])
    assert status == 200, body
