"""PostgreSQL for the tests: where the server is, whether it answers, and what a test that needs
it does when it does not (run, skip with one line, or fail when the run requires PostgreSQL).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

# The server the PostgreSQL tests use (trust auth, user postgres), and the variable that moves it.
PG_ENV = "AGENTCRON_TEST_PG"
PG_DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
# Set by .ci/run: there a missing server is a broken machine, not a laptop without PostgreSQL.
REQUIRE_ENV = "AGENTCRON_REQUIRE_POSTGRES"
# Loopback answers or refuses at once; a remote address gets this long, once per session.
CONNECT_TIMEOUT_S = 1.0

Verdict = Literal["run", "skip", "fail"]


def pg_admin_url(env: Mapping[str, str] = os.environ) -> str:
    """The URL of the server's maintenance database (scratch databases are made through it)."""
    return env.get(PG_ENV) or PG_DEFAULT_URL


def pg_address(url: str) -> tuple[str, int]:
    """The TCP host and port of a PostgreSQL URL (libpq's defaults where it names none)."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def pg_required(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this run must have PostgreSQL (`AGENTCRON_REQUIRE_POSTGRES=1`)."""
    return env.get(REQUIRE_ENV, "").strip() not in ("", "0")


def pg_answers(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> bool:
    """Whether anything accepts a TCP connection there: a server that answers but refuses the
    login is not hidden by a skip, its tests fail with the server's own message.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def postgres_verdict(answers: bool, required: bool, where: str) -> tuple[Verdict, str]:
    """What a test marked `postgres` does, and the one line that says why."""
    if answers:
        return "run", ""
    reason = (
        f"PostgreSQL is not reachable at {where}: start it or set "
        f"{PG_ENV}=postgresql://USER@HOST:PORT/DB"
    )
    if required:
        return "fail", f"{reason} ({REQUIRE_ENV} is set: this run requires PostgreSQL)"
    return "skip", reason
