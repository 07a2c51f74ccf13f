"""Budgets through the library on SQLite and PostgreSQL: a fire whose estimate would pass its
job's budget is recorded `skipped` with a notice in the session; a run that reaches a cap
pauses the job once, with `JobBudgetReached` and a message a real channel gets; a new UTC day
does not resume it (a person does).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.channels import ChannelManager
from agentcron.domain.budgets import Budget
from agentcron.domain.events import Event, JobBudgetReached
from agentcron.domain.jobs import Job
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.channels import RecordingChannel
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)
from tests.integration.test_fire_path_cost import counting

KEY = "telegram:42"
# One hourly fire's statements over its hour on SQLite: 41 before budgets (the claim, the
# turn's start and end, the stamp of its job, the reaper's periodic reads) and with them; the
# alert sweep that runs with each reap reads 8 more.
PLAIN_FIRE_STATEMENTS = 49


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


class Metered:
    """A runner whose every turn reports `cost` dollars and 100 + 50 tokens; it keeps what
    each turn was given.
    """

    def __init__(self, cost: float = 0.4) -> None:
        self.cost = cost
        self.turns: list[TurnInput] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.turns.append(turn)
        usage = {"input_tokens": 100, "output_tokens": 50, "cost_usd": self.cost}
        return Outcome.succeeded(f"reply {len(self.turns)}", usage=usage)


@pytest.fixture
def metered() -> Metered:
    return Metered()


@pytest.fixture
async def cron(make_cron: CronFactory, metered: Metered) -> AgentCron:
    return await make_cron(runner=metered)


@pytest.fixture
async def channel(cron: AgentCron) -> AsyncIterator[RecordingChannel]:
    manager = ChannelManager(cron, [RecordingChannel(name="telegram")])
    await manager.start()
    (own,) = manager.channels
    assert isinstance(own, RecordingChannel)
    yield own
    await manager.stop(grace=1.0)


async def hourly(cron: AgentCron, **kw: Any) -> Job:
    return await cron.jobs.create(
        name="beat", when="every 1h", message="check", session_key=KEY, **kw
    )


async def hours(cron: AgentCron, n: int) -> None:
    """Let `n` hourly fires come due, one at a time, each to its end."""
    clock = cron.clock
    assert isinstance(clock, FakeClock)
    for _ in range(n):
        clock.advance(timedelta(hours=1))
        await wait_settled(cron.engine)


async def test_a_fire_that_would_pass_the_day_budget_is_skipped_with_one_notice(
    cron: AgentCron, metered: Metered
) -> None:
    job = await hourly(cron, budget=Budget(usd_day=1.0))
    await hours(cron, 4)  # 0.4 + 0.4 ran; 0.8 + 0.4 would pass 1.0: the next two skipped
    runs = sorted(await cron.runs.list(job.id), key=lambda r: r.fire_at)
    assert [r.state for r in runs] == [RunState.SUCCEEDED] * 2 + [RunState.SKIPPED] * 2
    assert runs[2].error is not None
    assert runs[2].error.startswith("skipped: budget: ")
    assert "$1.00 per day" in runs[2].error
    assert len(metered.turns) == 2
    notices = [m for m in await cron.sessions.messages(KEY) if m.meta.get("budget")]
    assert [m.meta["automation_run_id"] for m in notices] == [runs[2].id]  # one per stretch
    assert "Skipped “beat”" in notices[0].content
    stored = await cron.jobs.get(job.id)
    assert stored.enabled
    assert stored.spend is not None
    assert (stored.spend.day_usd, stored.spend.day_tokens) == (0.8, 300)


async def test_reaching_the_cap_pauses_once_with_an_event_and_a_channel_message(
    cron: AgentCron, metered: Metered, channel: RecordingChannel
) -> None:
    metered.cost = 0.5
    heard: list[Event] = []
    cron.subscribe(heard.append, types=[JobBudgetReached])
    job = await hourly(cron, budget=Budget(usd_day=1.0))
    await hours(cron, 4)  # 0.5, then 0.5 reaches 1.0: paused; no fire after it
    runs = await cron.runs.list(job.id)
    assert len(runs) == 2
    assert len(metered.turns) == 2
    stored = await cron.jobs.get(job.id)
    assert not stored.enabled
    assert stored.next_run_at is None
    assert stored.paused_reason == "paused: budget reached: $1.00 of $1.00 per day"
    assert [(e.job_id, e.reason) for e in heard if isinstance(e, JobBudgetReached)] == [
        (job.id, "budget reached: $1.00 of $1.00 per day")
    ]
    sent = [m.text for m in channel.got if "Paused" in m.text]
    assert sent == [
        "Paused “beat”: budget reached: $1.00 of $1.00 per day. It stays paused until someone resumes it."
    ]
    # A new UTC day does not resume it: a person does.
    await hours(cron, 24)
    assert not (await cron.jobs.get(job.id)).enabled
    assert len(metered.turns) == 2


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token="t", hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c


async def test_spend_against_the_budget_through_rest(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    assert (await api.post("/api/sessions", json={"key": "api:b"})).status_code == 201
    body = {"session_key": "api:b", "name": "beat", "message": "check", "when": "every 1h"}
    for bad in ({}, {"usd_day": -1}, {"usd_day": 1, "pounds": 2}, {"tokens_day": 0}):
        refused = await api.post("/api/jobs", json=body | {"budget": bad})
        assert refused.status_code == 422, refused.text
    made = await api.post("/api/jobs", json=body | {"budget": {"usd_day": 5, "tokens_run": 900}})
    assert made.status_code == 201, made.text
    job = made.json()
    assert job["policy"]["budget"] == {
        "usd_run": None, "usd_day": 5.0, "usd_month": None,
        "tokens_run": 900, "tokens_day": None, "tokens_month": None,
    }  # fmt: skip
    await hours(cron, 2)
    spend = (await api.get(f"/api/jobs/{job['id']}/spend", params={"days": 3})).json()
    assert spend["spent"]["day_usd"] == 0.8
    assert spend["spent"]["day_tokens"] == 300
    assert (spend["spent"]["est_usd"], spend["spent"]["est_runs"]) == (0.4, 2)
    assert [(d["runs"], d["cost_usd"]) for d in spend["days"]] == [(0, None), (0, None), (2, 0.8)]
    assert (await api.get(f"/api/jobs/{job['id']}/spend", params={"days": 0})).status_code == 422
    assert (await api.get("/api/jobs/nope/spend")).status_code == 404
    # Without a budget nothing is kept running; the days are still counted.
    cleared = await api.patch(f"/api/jobs/{job['id']}", json={"budget": None})
    assert cleared.json()["policy"]["budget"] is None
    spend = (await api.get(f"/api/jobs/{job['id']}/spend")).json()
    assert spend["spent"] is None
    assert spend["days"][-1]["cost_usd"] == 0.8
    # A budget given again starts from what was spent today.
    again = await api.patch(f"/api/jobs/{job['id']}", json={"budget": {"usd_day": 1}})
    assert again.status_code == 200, again.text
    spend = (await api.get(f"/api/jobs/{job['id']}/spend")).json()
    assert (spend["spent"]["day_usd"], spend["spent"]["est_runs"]) == (0.8, 2)


def test_budget_and_spend_through_the_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
                "--when", "every day at 9", "--budget-usd-day", "2.5", "--budget-tokens-run",
                "4000", "--context", "fresh", "--tools", "cron, schedule_recall",
                "--db", db, "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    job = json.loads(added.output)
    assert job["policy"]["budget"]["usd_day"] == 2.5
    assert job["policy"]["budget"]["tokens_run"] == 4000
    assert (job["context"], job["tools"]) == ("fresh", ["cron", "schedule_recall"])
    shown = cli("jobs", "spend", job["id"], "--days", "2", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "$2.50 per day" in shown.output
    assert "4,000 tokens per run" in shown.output
    spend = json.loads(cli("jobs", "spend", job["id"], "--db", db, "--json").output)
    assert len(spend["days"]) == 7
    assert spend["spent"]["day_usd"] == 0
    refused = cli("jobs", "add", "--session", "api:ops", "--name", "x", "--message", "m",
                  "--when", "every day at 9", "--tools", "no such", "--db", db)  # fmt: skip
    assert refused.exit_code != 0


async def fire_statements(cron: AgentCron, job: Job) -> int:
    """Statements one scheduled fire of `job` costs, from its claim to its settled end."""
    await wait_settled(cron.engine)
    with counting() as counts:
        await hours(cron, 1)
    assert len(await cron.runs.list(job.id)) == 1
    return counts["statements"]


@pytest.mark.parametrize("cron_backend", ["sqlite"])
async def test_a_fire_without_a_budget_costs_no_statement_more(make_cron: CronFactory) -> None:
    cron = await make_cron()  # the recorder runner
    plain = await fire_statements(cron, await hourly(cron))
    # As many as without budgets (see PLAIN_FIRE_STATEMENTS).
    assert plain == PLAIN_FIRE_STATEMENTS
