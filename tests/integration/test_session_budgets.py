"""A session's budget through the library on SQLite and PostgreSQL: its spend across its jobs'
fires; a fire of any of its jobs that would pass it is recorded `skipped` (budget (session))
with one notice for the session; a run that reaches a cap tells it once (`SessionBudgetReached`,
a message a real channel gets) and pauses no job; a new UTC day lets the fires run again.
Also: REST (`PUT /api/sessions/{key}/budget`, `GET .../spend`) and the CLI.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from agentcron.app import AgentCron
from agentcron.channels import ChannelManager
from agentcron.domain.budgets import Budget
from agentcron.domain.events import Event, SessionBudgetReached
from agentcron.domain.sessions import Session
from agentcron.domain.states import RunState
from agentcron.errors import InvalidInputError
from agentcron.server import create_app
from agentcron.store.errors import SessionNotFoundError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.channels import RecordingChannel
from tests.integration.test_budgets import KEY, Metered, hourly, hours
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)
from tests.integration.test_fire_path_cost import counting

# One hourly fire's on SQLite: 49 before session budgets; 48 since a claim inserts only the
# sessions that are missing (it read them first anyway).
PLAIN_FIRE_STATEMENTS_NOW = 48


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


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


async def budget(cron: AgentCron, caps: Budget | None) -> Session:
    """The session (made when not yet there) with its budget set to `caps`."""
    await cron.sessions.create(KEY)
    return await cron.sessions.set_budget(KEY, caps)


async def two_jobs(cron: AgentCron) -> tuple[str, str]:
    """Two hourly jobs of the session, both due at the same fires."""
    a = await hourly(cron)
    b = await cron.jobs.create(name="other", when="every 1h", message="look", session_key=KEY)
    return a.id, b.id


async def states(cron: AgentCron, job_id: str) -> list[RunState]:
    return [r.state for r in sorted(await cron.runs.list(job_id), key=lambda r: r.fire_at)]


async def test_the_session_budget_skips_the_fires_of_all_its_jobs_with_one_notice(
    cron: AgentCron, metered: Metered
) -> None:
    a, b = await two_jobs(cron)
    await budget(cron, Budget(usd_day=2.0))
    # each hour: two runs of $0.40; after two hours $1.60 spent, an estimate of $0.40:
    # $2.00 exactly still fits, so the third hour's first fire runs, its second would pass
    await hours(cron, 4)
    runs = sorted(
        [*await cron.runs.list(a), *await cron.runs.list(b)], key=lambda r: (r.fire_at, r.id)
    )
    ran = [r for r in runs if r.state is RunState.SUCCEEDED]
    skipped = [r for r in runs if r.state is RunState.SKIPPED]
    assert len(metered.turns) == len(ran) == 5
    assert len(skipped) == 3
    for run in skipped:
        assert run.error is not None
        assert run.error.startswith("skipped: budget (session): ")
        assert run.error_details == {
            "budget": run.error[len("skipped: budget (session): ") :],
            "scope": "session",
        }
    # jobs stay enabled: the session pauses none
    assert [(await cron.jobs.get(j)).enabled for j in (a, b)] == [True, True]
    notices = [m for m in await cron.sessions.messages(KEY) if m.meta.get("budget")]
    skip_notices = [m for m in notices if m.meta["status"] == "skipped"]
    assert len(skip_notices) == 1  # one for the session, not one per job
    assert "this session's" in skip_notices[0].content
    session = await cron.sessions.get(KEY)
    assert session.spend is not None
    assert (session.spend.day_usd, session.spend.day_tokens) == (2.0, 750)


async def test_reaching_the_session_cap_tells_once_pauses_nothing_and_a_new_day_runs_again(
    cron: AgentCron, metered: Metered, channel: RecordingChannel
) -> None:
    metered.cost = 0.5
    heard: list[Event] = []
    cron.subscribe(heard.append, types=[SessionBudgetReached])
    job = await hourly(cron)
    await budget(cron, Budget(usd_day=1.0))
    await hours(cron, 3)  # 0.5, then 0.5 reaches 1.0; the third fire is skipped
    assert await states(cron, job.id) == [RunState.SUCCEEDED] * 2 + [RunState.SKIPPED]
    reached = "budget reached: $1.00 of $1.00 per day"
    assert [(e.job_id, e.reason) for e in heard if isinstance(e, SessionBudgetReached)] == [
        (job.id, reached)
    ]
    stored = await cron.jobs.get(job.id)
    assert stored.enabled
    assert stored.paused_reason is None
    sent = [m.text for m in channel.got if "This session's" in m.text]
    assert sent == [
        f"This session's {reached}. The fires of its automations are skipped until the "
        "budget allows (a new day or month, or a higher budget); none is paused."
    ]
    runs = sorted(await cron.runs.list(job.id), key=lambda r: r.fire_at)
    assert runs[2].error == f"skipped: budget (session): {reached}"
    # the next UTC day: the job's fires run again (no person needed)
    clock = cron.clock
    assert isinstance(clock, FakeClock)
    midnight = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    midnight += timedelta(days=1)
    while not [r for r in await cron.runs.list(job.id) if r.fire_at >= midnight]:
        await hours(cron, 1)
    (first,) = [r for r in await cron.runs.list(job.id) if r.fire_at >= midnight]
    assert first.state is RunState.SUCCEEDED
    assert len(metered.turns) == 3


async def test_raising_the_session_budget_lets_the_fires_run_and_removing_it_stops_the_figures(
    cron: AgentCron, metered: Metered
) -> None:
    job = await hourly(cron)
    await budget(cron, Budget(tokens_day=150))
    await hours(cron, 2)  # 150 tokens reach the cap; the next fire is skipped
    assert await states(cron, job.id) == [RunState.SUCCEEDED, RunState.SKIPPED]
    raised = await budget(cron, Budget(tokens_day=1000))
    assert raised.spend is not None
    assert raised.spend.day_tokens == 150  # a changed budget keeps the figures
    await hours(cron, 1)
    assert (await states(cron, job.id))[-1] is RunState.SUCCEEDED
    removed = await budget(cron, None)
    assert (removed.budget, removed.spend) == (None, None)
    await hours(cron, 1)
    assert (await cron.sessions.get(KEY)).spend is None
    assert len(metered.turns) == 3


async def test_a_budget_given_later_starts_from_what_the_jobs_spent_today(
    cron: AgentCron, metered: Metered
) -> None:
    await hourly(cron)
    await hours(cron, 2)  # two runs, $0.80 and 300 tokens, before any budget
    await cron.sessions.send(KEY, "a person's own turn: not the jobs' spend")
    await wait_settled(cron.engine)
    session = await budget(cron, Budget(usd_month=10.0))
    assert session.spend is not None
    assert (session.spend.day_usd, session.spend.day_tokens) == (0.8, 300)
    assert (session.spend.est_usd, session.spend.est_tokens, session.spend.est_runs) == (
        0.4,
        150,
        2,
    )


async def test_bad_session_budgets_are_refused(cron: AgentCron) -> None:
    await hourly(cron)
    with pytest.raises(InvalidInputError):
        await budget(cron, Budget(usd_day=-1.0))
    with pytest.raises(SessionNotFoundError):
        await cron.sessions.set_budget("telegram:nobody", Budget(usd_day=1.0))


@pytest.mark.parametrize("cron_backend", ["sqlite"])
async def test_only_a_session_with_a_budget_costs_statements_more_per_fire(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron()  # the recorder runner
    await cron.sessions.create(KEY)
    await hourly(cron)

    async def four_fires() -> list[int]:
        counted = []
        for _ in range(4):
            await wait_settled(cron.engine)
            with counting() as counts:
                await hours(cron, 1)
            counted.append(counts["statements"])
        return counted

    plain = await four_fires()
    # a plain fire costs no more than it did before session budgets (counted at the merge of
    # job budgets; every other hour the reaper's reads add some): the claim's query
    # reads the session's columns in its one join
    assert plain[0] == PLAIN_FIRE_STATEMENTS_NOW
    await cron.sessions.set_budget(KEY, Budget(usd_month=100.0))
    budgeted = await four_fires()
    # the run-end write reads and updates the session's figures: two statements a fire
    assert [b - p for b, p in zip(budgeted, plain, strict=True)] == [2, 2, 2, 2]


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token="t", hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c


async def test_session_budget_and_spend_through_rest(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    await hourly(cron)
    await cron.sessions.create(KEY)
    url = f"/api/sessions/{KEY}"
    for bad in ({}, {"usd_day": 0}, {"usd_day": "x"}, {"tokens_day": 1.5}, {"nope": 1}):
        refused = await api.put(f"{url}/budget", json=bad)
        assert refused.status_code == 422, (bad, refused.text)
    assert (await api.put("/api/sessions/api:none/budget", json={"usd_day": 1})).status_code == 404
    set_ = await api.put(f"{url}/budget", json={"usd_day": 1.5, "tokens_month": 90000})
    assert set_.status_code == 200, set_.text
    body = set_.json()
    assert body["budget"] == {
        "usd_run": None, "usd_day": 1.5, "usd_month": None,
        "tokens_run": None, "tokens_day": None, "tokens_month": 90000,
    }  # fmt: skip
    assert body["spent"]["day_usd"] == 0
    await hours(cron, 1)
    spend = await api.get(f"{url}/spend", params={"days": 3})
    assert spend.status_code == 200
    got = spend.json()
    assert got["session_key"] == KEY
    assert got["spent"]["day_usd"] == 0.4
    assert got["spent"]["est_runs"] == 1
    assert len(got["days"]) == 3
    assert got["days"][-1]["runs"] == 1
    assert got["days"][-1]["cost_usd"] == 0.4
    assert (await api.get(f"{url}/spend", params={"days": 0})).status_code == 422
    assert (await api.get(f"{url}/spend", params={"days": 367})).status_code == 422
    cleared = await api.delete(f"{url}/budget")
    assert cleared.status_code == 200
    assert (cleared.json()["budget"], cleared.json()["spent"]) == (None, None)


def test_session_budget_and_spend_through_the_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    set_ = cli("sessions", "budget", "api:ops", "--usd-day", "2.5", "--tokens-run", "4000",
               "--db", db)  # fmt: skip
    assert set_.exit_code == 0, set_.output
    assert "$2.50 per day" in set_.output
    assert "4,000 tokens per run" in set_.output
    spend = json.loads(
        cli("sessions", "spend", "api:ops", "--days", "2", "--db", db, "--json").output
    )
    assert spend["budget"]["usd_day"] == 2.5
    assert len(spend["days"]) == 2
    assert cli("sessions", "budget", "api:ops", "--usd-day", "-1", "--db", db).exit_code != 0
    assert cli("sessions", "budget", "api:ops", "--db", db).exit_code != 0  # no cap, no --clear
    cleared = cli("sessions", "budget", "api:ops", "--clear", "--db", db)
    assert cleared.exit_code == 0, cleared.output
    assert "no budget" in cleared.output
