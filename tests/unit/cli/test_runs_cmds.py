"""`agentcron runs list`: the latest runs across jobs with job names, filters, pages."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner, Result

from agentcron.cli import app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory

MIN = timedelta(minutes=1)


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


async def run(*args: str) -> Result:
    """One command, on its own event loop (off the test's)."""
    return await asyncio.to_thread(cli, *args)


async def test_runs_list_shows_the_latest_runs_across_jobs(
    tmp_path: Path, make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron()  # the recorder runner, on tests/conftest's db_path
    await cron.sessions.create("api:ops")
    await cron.sessions.create("api:home")
    ping = await cron.jobs.create(name="ping", when="in 1m", message="m", session_key="api:ops")
    await cron.jobs.create(name="water plants", when="in 2m", message="m", session_key="api:home")
    clock.advance(2 * MIN)
    await wait_settled(cron.engine)
    await cron.jobs.delete(ping.id)  # its runs keep its name
    await cron.close()
    db = str(tmp_path / "agentcron.db")

    listed = await run("runs", "list", "--db", db, "--tz", "Europe/Berlin")
    assert listed.exit_code == 0, listed.output
    lines = [line for line in listed.stdout.splitlines() if "succeeded" in line]
    assert len(lines) == 2
    assert "│ 2026-11-22 13:02:00 Europe/Berlin │ water plants │ api:home │" in lines[0]
    assert "│ 2026-11-22 13:01:00 Europe/Berlin │ ping" in lines[1]  # newest first
    assert ping.id not in listed.stdout  # names, not job ids

    first = await run("runs", "list", "--db", db, "--limit", "1", "--json")
    (newest,) = json.loads(first.stdout)
    assert newest["job_name"] == "water plants"
    cursor = first.stderr.split("--cursor ")[1].split()[0]
    second = await run("runs", "list", "--db", db, "--limit", "1", "--cursor", cursor, "--json")
    assert [r["job_name"] for r in json.loads(second.stdout)] == ["ping"]
    assert "more:" not in second.stderr  # the last page
    every = await run("runs", "list", "--db", db, "--limit", "1", "--all", "--json")
    assert [r["job_name"] for r in json.loads(every.stdout)] == ["water plants", "ping"]

    of_ops = await run("runs", "list", "--db", db, "--session", "api:ops", "--json")
    assert [r["job_id"] for r in json.loads(of_ops.stdout)] == [ping.id]
    of_ping = await run("runs", "list", "--db", db, "--job", ping.id, "--json")
    assert [r["job_name"] for r in json.loads(of_ping.stdout)] == ["ping"]
    since = await run("runs", "list", "--db", db, "--since", "2026-11-22T12:02", "--json")
    assert [r["job_name"] for r in json.loads(since.stdout)] == ["water plants"]
    failed = await run("runs", "list", "--db", db, "--state", "failed", "--json")
    assert json.loads(failed.stdout) == []


async def test_runs_list_names_unknown_jobs_sessions_and_cursors(
    tmp_path: Path, make_cron: CronFactory
) -> None:
    cron = await make_cron()
    await cron.close()
    db = str(tmp_path / "agentcron.db")
    for args, message in [
        (("--job", "01NOSUCHJOB"), "no job with id '01NOSUCHJOB'"),
        (("--session", "api:nobody"), "no session with key 'api:nobody'"),
        (("--cursor", "not-ours"), "cursor is not one this list gave: pass next_cursor as it is"),
    ]:
        answer = await run("runs", "list", "--db", db, *args)
        assert answer.exit_code == 1
        assert answer.stderr == f"error: {message}\n"
    zone = await run("runs", "list", "--db", db, "--tz", "Mars/Base")
    assert zone.exit_code == 2
    assert "unknown time zone 'Mars/Base'" in zone.stderr
