"""A job's DST policy (`dst_gap` shift|skip, `dst_fold` first|last|both) through the public
surfaces: the library with the engine firing across real transitions on a FakeClock (a `skip`
job does not fire on the spring-forward day, a `both` job fires twice in the fall-back fold),
on SQLite and PostgreSQL; REST create, PATCH and their refusals; the agent's cron tool; the CLI.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agentcron.agent.tools import ToolDeps
from agentcron.agent.tools import cron as cron_tool
from agentcron.app import AgentCron
from agentcron.domain.states import RunState
from agentcron.schedule import CronSpec, DaysSpec, DstFold, DstGap, InvalidSpecError
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory, Recorder
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)

TOKEN = "test-token"
KEY = "websocket:abc"
BERLIN = "Europe/Berlin"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


async def run_until(cron: AgentCron, clock: FakeClock, job_ids: list[str], end: datetime) -> None:
    """Move the clock from one due fire of the jobs to the next, letting each run, to `end`."""
    while True:
        jobs = [await cron.jobs.get(job_id) for job_id in job_ids]
        due = min((j.next_run_at for j in jobs if j.next_run_at is not None), default=None)
        if due is None or due > end:
            return
        clock.set(due)
        await wait_settled(cron.engine)


async def fired(cron: AgentCron, job_id: str) -> list[datetime]:
    runs = await cron.runs.list(job_id)
    assert all(run.state is RunState.SUCCEEDED for run in runs), runs
    return sorted(run.fire_at for run in runs)


async def test_skip_does_not_fire_on_the_day_the_clocks_skip_its_time(
    make_cron: CronFactory, recorder: Recorder
) -> None:
    # Berlin springs forward on 2026-03-29: 02:00 -> 03:00, so 02:30 does not exist that day.
    clock = FakeClock(utc("2026-03-28T12:00Z"))
    cron = await make_cron(clock=clock)
    when = "every day at 2:30"
    skip = await cron.jobs.create(
        name="skip", when=when, tz=BERLIN, session_key="websocket:skip", dst_gap="skip"
    )
    shift = await cron.jobs.create(name="shift", when=when, tz=BERLIN, session_key=KEY)
    assert skip.spec == CronSpec(expr="30 2 * * *", tz=BERLIN, dst_gap=DstGap.SKIP)
    assert shift.spec.dst_gap is DstGap.SHIFT
    await run_until(cron, clock, [skip.id, shift.id], utc("2026-03-31T12:00Z"))
    assert await fired(cron, skip.id) == [
        utc("2026-03-30T02:30+02:00"),
        utc("2026-03-31T02:30+02:00"),
    ]
    assert await fired(cron, shift.id) == [
        utc("2026-03-29T03:00+02:00"),  # the gap's end
        utc("2026-03-30T02:30+02:00"),
        utc("2026-03-31T02:30+02:00"),
    ]
    assert sorted(recorder.names()) == ["shift"] * 3 + ["skip"] * 2


async def test_both_fires_twice_in_the_fold_and_last_once_at_its_end(
    make_cron: CronFactory, recorder: Recorder
) -> None:
    # Berlin falls back on 2026-10-25: 03:00 -> 02:00, so 02:30 happens twice.
    clock = FakeClock(utc("2026-10-24T12:00Z"))
    cron = await make_cron(clock=clock)
    both = await cron.jobs.create(
        name="both", when="every day at 2:30", tz=BERLIN, session_key=KEY, dst_fold="both"
    )
    last = await cron.jobs.create(
        name="last",
        spec=DaysSpec(step=1, time="02:30", start=clock.now().date(), tz=BERLIN),
        session_key="websocket:last",
        dst_fold=DstFold.LAST,
    )
    first = await cron.jobs.create(
        name="first", when="every day at 2:30", tz=BERLIN, session_key="websocket:first"
    )
    await run_until(cron, clock, [both.id, last.id, first.id], utc("2026-10-26T12:00Z"))
    assert await fired(cron, both.id) == [
        utc("2026-10-25T02:30+02:00"),
        utc("2026-10-25T02:30+01:00"),
        utc("2026-10-26T02:30+01:00"),
    ]
    assert await fired(cron, last.id) == [
        utc("2026-10-25T02:30+01:00"),  # the second pass only
        utc("2026-10-26T02:30+01:00"),
    ]
    assert await fired(cron, first.id) == [
        utc("2026-10-25T02:30+02:00"),
        utc("2026-10-26T02:30+01:00"),
    ]
    assert sorted(recorder.names()).count("both") == 3


async def test_the_library_refuses_a_policy_for_an_interval(make_cron: CronFactory) -> None:
    cron = await make_cron()
    with pytest.raises(InvalidSpecError, match="an interval, which runs in absolute time"):
        await cron.jobs.create(name="poll", when="every 2h", session_key=KEY, dst_gap="skip")
    assert await cron.jobs.list() == []


# -- REST ---------------------------------------------------------------------------------


@pytest.fixture
async def api(make_cron: CronFactory) -> AsyncIterator[httpx.AsyncClient]:
    cron = await make_cron()
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        assert (await c.post("/api/sessions", json={"key": KEY, "tz": BERLIN})).status_code == 201
        yield c


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def a_job(api: httpx.AsyncClient, **kw: Any) -> dict[str, Any]:
    body = {"session_key": KEY, "name": "night", "message": "tidy", "when": "every day at 2:30"}
    return answer(await api.post("/api/jobs", json=body | kw), 201)  # type: ignore[no-any-return]


async def test_rest_create_shows_the_policy_in_the_spec_and_in_words(
    api: httpx.AsyncClient,
) -> None:
    plain = await a_job(api)
    assert plain["spec"] == {"kind": "cron", "expr": "30 2 * * *", "tz": BERLIN}
    assert plain["schedule"] == "every day at 02:30 (Europe/Berlin)"
    job = await a_job(api, dst_gap="skip", dst_fold="both")
    assert job["spec"]["dst_gap"] == "skip"
    assert job["spec"]["dst_fold"] == "both"
    assert job["schedule"] == (
        "every day at 02:30 (Europe/Berlin); not on a day the clocks skip its time, "
        "both times when the clocks repeat it"
    )
    days = await a_job(api, when="every 3 days at 2:30", dst_fold="last")
    assert days["spec"]["kind"] == "days"
    assert days["spec"]["dst_fold"] == "last"
    assert "dst_gap" not in days["spec"]
    shown = answer(await api.get(f"/api/jobs/{job['id']}"))
    assert shown["spec"]["dst_gap"] == "skip"


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"dst_gap": "later"}, 422, "dst_gap"),
        ({"dst_fold": "twice"}, 422, "dst_fold"),
        ({"dst_fold": None}, 422, "dst_fold"),
        ({"when": "every 2h", "dst_gap": "skip"}, 422, "an interval, which runs in absolute"),
        ({"when": "tomorrow at 2:30", "dst_fold": "both"}, 422, "a one-time schedule"),
    ],
)
async def test_rest_create_refuses_a_wrong_policy(
    api: httpx.AsyncClient, body: dict[str, Any], status: int, says: str
) -> None:
    base = {"session_key": KEY, "name": "night", "message": "tidy", "when": "every day at 2:30"}
    refused = await api.post("/api/jobs", json=base | body)
    assert refused.status_code == status, refused.text
    assert says in refused.text
    assert answer(await api.get("/api/jobs"))["jobs"] == []


async def test_rest_patch_changes_the_policy_and_a_new_when_keeps_it(
    api: httpx.AsyncClient,
) -> None:
    job = await a_job(api)
    path = f"/api/jobs/{job['id']}"
    patched = answer(await api.patch(path, json={"dst_gap": "skip"}))
    assert patched["spec"] == {"kind": "cron", "expr": "30 2 * * *", "tz": BERLIN,
                               "dst_gap": "skip"}  # fmt: skip
    # a new time of day keeps the policy; a new fold policy joins it
    moved = answer(await api.patch(path, json={"when": "every day at 1:15", "dst_fold": "last"}))
    assert (moved["spec"]["expr"], moved["spec"]["dst_gap"], moved["spec"]["dst_fold"]) == (
        "15 1 * * *", "skip", "last",
    )  # fmt: skip
    kept = answer(await api.patch(path, json={"when": "every 2 weeks on sunday at 2:30"}))
    assert kept["spec"]["kind"] == "days"
    assert (kept["spec"]["dst_gap"], kept["spec"]["dst_fold"]) == ("skip", "last")
    # back to the default: the spec is as if it never had one
    reset = answer(await api.patch(path, json={"dst_gap": "shift", "dst_fold": "first"}))
    assert "dst_gap" not in reset["spec"]
    assert "dst_fold" not in reset["spec"]
    # an interval has no policy to keep; asking it for one is refused
    interval = answer(await api.patch(path, json={"when": "every 2h"}))
    assert interval["spec"]["kind"] == "every"
    refused = await api.patch(path, json={"dst_fold": "both"})
    assert refused.status_code == 422
    assert "an interval" in refused.text
    assert (await api.patch(path, json={"dst_gap": None})).status_code == 422


async def test_rest_patch_of_the_policy_moves_the_next_fire(make_cron: CronFactory) -> None:
    clock = FakeClock(utc("2026-03-28T12:00Z"))
    cron = await make_cron(clock=clock)
    app = create_app(cron, token=TOKEN, hook_token="hook")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        answer(await c.post("/api/sessions", json={"key": KEY, "tz": BERLIN}), 201)
        job = await a_job(c)
        assert utc(job["next_fire_at"]) == utc("2026-03-29T03:00+02:00")
        skipped = answer(await c.patch(f"/api/jobs/{job['id']}", json={"dst_gap": "skip"}))
        assert utc(skipped["next_fire_at"]) == utc("2026-03-30T02:30+02:00")
        detail = answer(await c.get(f"/api/jobs/{job['id']}"))
        assert [utc(f) for f in detail["upcoming"][:2]] == [
            utc("2026-03-30T02:30+02:00"),
            utc("2026-03-31T02:30+02:00"),
        ]


# -- the agent's cron tool, the CLI -------------------------------------------------------


async def test_the_cron_tool_adds_and_updates_the_policy(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron()
    deps = ToolDeps(jobs=cron.jobs, now=clock.now(), session_key=KEY, tz=BERLIN)
    ctx = SimpleNamespace(deps=deps)
    text = await cron_tool(
        ctx, "add", name="night", when="every day at 2:30", message="tidy", dst_gap="skip"
    )  # type: ignore[arg-type]
    assert "not on a day the clocks skip its time" in text
    (job,) = await cron.jobs.list()
    assert job.spec.dst_gap is DstGap.SKIP  # type: ignore[union-attr]
    text = await cron_tool(ctx, "update", name="night", dst_fold="both")  # type: ignore[arg-type]
    assert text.startswith("Updated “night”")
    text = await cron_tool(ctx, "update", name="night", when="every day at 1:30")  # type: ignore[arg-type]
    job = await cron.jobs.get(job.id)
    assert job.spec == CronSpec(
        expr="30 1 * * *", tz=BERLIN, dst_gap=DstGap.SKIP, dst_fold=DstFold.BOTH
    )
    refused = await cron_tool(
        ctx, "add", name="poll", when="every 2h", message="look", dst_fold="last"
    )  # type: ignore[arg-type]
    assert "an interval" in refused
    assert len(await cron.jobs.list()) == 1


def test_the_cli_adds_and_updates_a_job_with_its_policy(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--tz", BERLIN, "--db", db).exit_code == 0
    add = ("jobs", "add", "--session", "api:ops", "--name", "night", "--message", "tidy",
           "--when", "every day at 2:30", "--db", db, "--json")  # fmt: skip
    added = cli(*add, "--dst-gap", "skip")
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout)
    assert job["spec"]["dst_gap"] == "skip"
    updated = cli("jobs", "update", job["id"], "--dst-fold", "last", "--db", db)
    assert updated.exit_code == 0, updated.output
    assert "the second time when the clocks repeat it" in updated.stdout
    shown = cli("jobs", "show", job["id"], "--db", db, "--json")
    assert json.loads(shown.stdout)["spec"]["dst_fold"] == "last"
    wrong = cli(*add, "--dst-fold", "twice")
    assert wrong.exit_code == 2
    assert "twice" in wrong.output
    interval = cli("jobs", "update", job["id"], "--when", "every 2h", "--dst-gap", "skip",
                   "--db", db)  # fmt: skip
    assert interval.exit_code != 0
    assert "an interval" in interval.output
    nothing = cli("jobs", "update", job["id"], "--db", db)
    assert nothing.exit_code == 2
    assert "nothing to change" in nothing.output
