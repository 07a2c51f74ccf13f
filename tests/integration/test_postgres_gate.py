"""The `postgres` marker's gate as a developer and CI meet it: pytest run in a child process on
the PostgreSQL tests of one file, the server's address pointed at a port nothing listens on.
Without AGENTCRON_REQUIRE_POSTGRES each test skips, with one summary line saying why; with it
the run fails. Needs no server (the gate's decisions: tests/unit/helpers/test_postgres.py).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Its PostgreSQL tests are both kinds: parametrized ("postgresql", marked by the conftest) and
# marked by hand.
FILE = "tests/integration/test_signals.py"

pytestmark = pytest.mark.slow


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def outcomes(out: str) -> dict[str, int]:
    """The counts of pytest's last line ("3 skipped, 5 deselected in 0.70s")."""
    last = out.strip().splitlines()[-1]
    return {kind.rstrip("s"): int(n) for n, kind in re.findall(r"(\d+) (\w+)", last)}


def run_postgres_tests(*, required: bool) -> tuple[int, str, str]:
    """pytest on FILE's `postgres` tests against a closed port: (exit code, output, address)."""
    where = f"127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if k != "AGENTCRON_REQUIRE_POSTGRES"}
    env["AGENTCRON_TEST_PG"] = f"postgresql://postgres@{where}/postgres"
    if required:
        env["AGENTCRON_REQUIRE_POSTGRES"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "postgres", FILE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=50, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, where


def test_without_a_server_the_postgres_tests_skip_with_one_line() -> None:
    code, out, where = run_postgres_tests(required=False)
    assert code == 0, out
    reason = (
        f"PostgreSQL is not reachable at {where}: start it or set "
        "AGENTCRON_TEST_PG=postgresql://USER@HOST:PORT/DB"
    )
    lines = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(lines) == 1, out
    assert lines[0].endswith(reason), out
    counts = outcomes(out)
    assert set(counts) == {"skipped", "deselected"}, out
    assert counts["skipped"] >= 2, out


def test_without_a_server_a_run_that_requires_postgresql_fails() -> None:
    code, out, where = run_postgres_tests(required=True)
    assert code == 1, out
    assert f"PostgreSQL is not reachable at {where}" in out
    assert "AGENTCRON_REQUIRE_POSTGRES is set" in out
    counts = outcomes(out)
    assert set(counts) == {"error", "deselected"}, out
    assert counts["error"] >= 2, out
