"""The `postgres` marker's gate as a developer and CI meet it: pytest run in a child process on
the PostgreSQL tests of one file, the server's address pointed at a port nothing listens on.
Without AGENTCRON_REQUIRE_POSTGRES each test skips, with one summary line saying why; with it
the run fails. Needs no server (the gate's decisions: tests/unit/helpers/test_postgres.py).
The two child runs are made side by side, once for both tests.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Its PostgreSQL tests are both kinds: parametrized ("postgresql", marked by the conftest) and
# marked by hand.
FILE = "tests/integration/test_signals.py"
# Plugins FILE and the gate never use, left out of the child runs: importing them was half of
# each run's start-up (the gate itself lives in tests/conftest.py).
UNUSED_PLUGINS = ["-p", "no:hypothesispytest", "-p", "no:schemathesis"]
IN_ONE_PROCESS = ["-n", "0"]  # one file: no workers to start

pytestmark = pytest.mark.slow


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def outcomes(out: str) -> dict[str, int]:
    """The counts of pytest's last line ("3 skipped, 5 deselected in 0.70s")."""
    last = out.strip().splitlines()[-1]
    return {kind.rstrip("s"): int(n) for n, kind in re.findall(r"(\d+) (\w+)", last)}


Run = tuple[int, str, str]  # exit code, output, the address that did not answer


def start_postgres_tests(*, required: bool) -> tuple[subprocess.Popen[str], str]:
    """pytest on FILE's `postgres` tests against a closed port, started: (process, address)."""
    where = f"127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if k != "AGENTCRON_REQUIRE_POSTGRES"}
    env["AGENTCRON_TEST_PG"] = f"postgresql://postgres@{where}/postgres"
    if required:
        env["AGENTCRON_REQUIRE_POSTGRES"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNUSED_PLUGINS,
         *IN_ONE_PROCESS, "-m", "postgres", FILE],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    return proc, where


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[bool, Run]]:
    """Both child runs (required or not), made at the same time (each is mostly pytest's own
    start-up): {required: (exit code, output, address)}.
    """
    started = {required: start_postgres_tests(required=required) for required in (False, True)}
    try:
        done: dict[bool, Run] = {}
        for required, (proc, where) in started.items():
            out, _ = proc.communicate(timeout=50)
            done[required] = (proc.returncode, out, where)
        yield done
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_without_a_server_the_postgres_tests_skip_with_one_line(runs: dict[bool, Run]) -> None:
    code, out, where = runs[False]
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


def test_without_a_server_a_run_that_requires_postgresql_fails(runs: dict[bool, Run]) -> None:
    code, out, where = runs[True]
    assert code == 1, out
    assert f"PostgreSQL is not reachable at {where}" in out
    assert "AGENTCRON_REQUIRE_POSTGRES is set" in out
    counts = outcomes(out)
    assert set(counts) == {"error", "deselected"}, out
    assert counts["error"] >= 2, out
