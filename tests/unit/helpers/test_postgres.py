"""The PostgreSQL gate of the tests (tests/helpers/postgres.py): run when the server answers;
without one, skip with one line on a laptop, fail when the run requires PostgreSQL (CI)."""

from __future__ import annotations

import socket

import pytest

from tests.helpers.postgres import (
    PG_DEFAULT_URL,
    pg_address,
    pg_admin_url,
    pg_answers,
    pg_required,
    postgres_verdict,
)


def test_a_server_that_answers_runs_the_test_required_or_not() -> None:
    assert postgres_verdict(True, False, "127.0.0.1:5432") == ("run", "")
    assert postgres_verdict(True, True, "127.0.0.1:5432") == ("run", "")


def test_no_server_on_a_laptop_skips_with_one_line_that_says_what_to_do() -> None:
    verdict, reason = postgres_verdict(False, False, "127.0.0.1:5432")
    assert verdict == "skip"
    assert reason == (
        "PostgreSQL is not reachable at 127.0.0.1:5432: start it or set "
        "AGENTCRON_TEST_PG=postgresql://USER@HOST:PORT/DB"
    )


def test_no_server_when_the_run_requires_postgresql_fails_it() -> None:
    verdict, reason = postgres_verdict(False, True, "db.example:6543")
    assert verdict == "fail"
    assert reason.startswith("PostgreSQL is not reachable at db.example:6543: start it or set ")
    assert "AGENTCRON_REQUIRE_POSTGRES is set" in reason
    assert "\n" not in reason


@pytest.mark.parametrize(
    ("value", "required"),
    [(None, False), ("", False), ("0", False), ("1", True), ("yes", True)],
)
def test_the_run_requires_postgresql_when_the_variable_says_so(
    value: str | None, required: bool
) -> None:
    env = {} if value is None else {"AGENTCRON_REQUIRE_POSTGRES": value}
    assert pg_required(env) is required


def test_the_server_is_read_from_agentcron_test_pg() -> None:
    assert pg_admin_url({}) == PG_DEFAULT_URL
    assert pg_admin_url({"AGENTCRON_TEST_PG": ""}) == PG_DEFAULT_URL
    assert pg_address(PG_DEFAULT_URL) == ("127.0.0.1", 5432)
    moved = pg_admin_url({"AGENTCRON_TEST_PG": "postgresql://u:pw@db.example:6543/postgres"})
    assert pg_address(moved) == ("db.example", 6543)
    assert pg_address("postgresql://u@db.example/postgres") == ("db.example", 5432)


def test_the_check_tells_a_listening_port_from_a_closed_one() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        host, port = listener.getsockname()
        assert pg_answers(host, port, timeout=1.0)
    # the same port, now closed: refused at once on loopback
    assert not pg_answers(host, port, timeout=1.0)
