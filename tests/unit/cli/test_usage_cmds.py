"""`agentcron usage`: tokens, cost, runs and turns per day, per session and per job."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner, Result

from agentcron.agent.offline import OfflineModel
from agentcron.cli import app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


async def test_usage_per_day_as_a_table_and_as_json(
    tmp_path: Path, make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron(runner=None, model=OfflineModel(0))
    await cron.sessions.create("api:ops")
    job = await cron.jobs.create(name="ping", when="in 1m", message="m", session_key="api:ops")
    await cron.sessions.send("api:ops", "hello")  # a person's turn on 2026-11-22
    clock.advance(timedelta(hours=13))  # the job's fire is a turn on 2026-11-23 (UTC)
    await wait_settled(cron.engine)
    turns = await cron.sessions.turns("api:ops")
    await cron.close()
    db = str(tmp_path / "agentcron.db")
    days = ("--days", "2", "--until", "2026-11-23")

    shown = await asyncio.to_thread(cli, "usage", "--db", db, *days)
    assert shown.exit_code == 0, shown.output
    rows = [line.split("│")[1:-1] for line in shown.stdout.splitlines() if "│ 2026" in line]
    assert [[c.strip() for c in row[:5]] for row in rows] == [
        ["2026-11-22", "api:ops", "-", "0", "1"],
        ["2026-11-23", "api:ops", "ping", "1", "1"],
    ]
    data = json.loads((await asyncio.to_thread(cli, "usage", "--db", db, *days, "--json")).stdout)
    tokens = sum((t.usage or {}).get("input_tokens", 0) for t in turns)
    assert tokens > 0
    assert data["total"]["input_tokens"] == tokens
    assert (data["total"]["runs"], data["total"]["turns"]) == (1, 2)
    of_job = json.loads(
        (await asyncio.to_thread(cli, "usage", "--db", db, *days, "--job", job.id, "--json")).stdout
    )
    assert [(d["day"], d["job_name"]) for d in of_job["days"]] == [("2026-11-23", "ping")]
    one_day = json.loads(
        (await asyncio.to_thread(cli, "usage", "--db", db, "--days", "1", "--until", "2026-11-22",
                                 "--json")).stdout
    )  # fmt: skip
    assert [d["day"] for d in one_day["days"]] == ["2026-11-22"]
    unknown = await asyncio.to_thread(cli, "usage", "--db", db, "--session", "api:nobody")
    assert (unknown.exit_code, unknown.stderr) == (1, "error: no session with key 'api:nobody'\n")
