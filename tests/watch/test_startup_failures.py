"""``mlcopilot watch`` that cannot start: one ``error:`` line saying what and where, a clean exit.

The installed command, each time with one address pointing at a port nothing listens on (the
rest real: tansu, the registry stand-in, the demo's Lite catalog): Kafka, the schema registry,
the state database, the catalog read for the start-up walk. Nothing is scanned before the
failure is reported, and no traceback is shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.broker import free_port
from testing.installed_cli import Ran, run_cli
from tests.watch.test_wire_watch import Home

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("watch")]

pytest.importorskip("datahub_actions", reason="the watch extra (acryl-datahub-actions)")


def watch(home: Home, **env: str) -> Ran:
    return run_cli(home.path, "watch", "--connect-timeout", "2s", env={**home.env, **env})


def error_lines(ran: Ran) -> list[str]:
    assert "Traceback" not in ran.stderr, ran.stderr
    return [line for line in ran.stderr.splitlines() if line.startswith("error:")]


def nothing_scanned(home: Home) -> bool:
    return not (home.path / "state.db").exists() or home.incidents() == []


def test_kafka_unreachable(home: Home) -> None:
    port = free_port()
    ran = watch(home, KAFKA_BOOTSTRAP_SERVER=f"127.0.0.1:{port}")
    assert ran.code == 3, ran.stderr
    [line] = error_lines(ran)
    assert line.startswith(
        f"error: cannot reach Kafka at 127.0.0.1:{port} (KAFKA_BOOTSTRAP_SERVER) within 2s"
    ), line
    assert nothing_scanned(home)


def test_schema_registry_unreachable(home: Home) -> None:
    port = free_port()
    ran = watch(home, SCHEMA_REGISTRY_URL=f"http://127.0.0.1:{port}")
    assert ran.code == 3, ran.stderr
    [line] = error_lines(ran)
    assert line.startswith(
        f"error: cannot reach the schema registry at http://127.0.0.1:{port} "
        "(SCHEMA_REGISTRY_URL) within 2s"
    ), line
    assert nothing_scanned(home)


def test_state_database_unreachable(home: Home) -> None:
    port = free_port()
    ran = watch(home, MLCOPILOT_STATE_URL=f"postgresql+psycopg://mlc@127.0.0.1:{port}/state")
    assert ran.code == 2, ran.stderr
    [line] = error_lines(ran)
    assert line.startswith(
        f"error: cannot open state database postgresql+psycopg://mlc@127.0.0.1:{port}/state"
    ), line
    assert "Connection refused" in line, line


def test_catalog_unreadable_at_the_start_up_walk(home: Home) -> None:
    port = free_port()
    ran = watch(home, MLCOPILOT_CATALOG=f"datahub:http://127.0.0.1:{port}")
    assert ran.code == 3, ran.stderr
    [line] = error_lines(ran)
    assert f"127.0.0.1:{port}" in line, line
    assert nothing_scanned(home)


def test_a_missing_lite_catalog(home: Home, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "catalog.db"
    ran = watch(home, MLCOPILOT_CATALOG=f"lite:{missing}")
    assert ran.code == 2, ran.stderr
    [line] = error_lines(ran)
    assert str(missing) in line, line
    assert not missing.exists()
    assert nothing_scanned(home)
