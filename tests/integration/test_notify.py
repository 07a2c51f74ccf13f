"""Speak only when it matters (issue 29): a job's notify policy through REST and the library,
for a session-bound fire (its reply stays in the transcript, a real channel does not get a held
one) and a delivery job (a held result is not evaluated nor delivered); every outcome is kept on
its run, which says why it was not delivered.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import Trigger
from agentcron.agent.tools import ToolDeps
from agentcron.agent.tools import cron as cron_tool
from agentcron.app import AgentCron
from agentcron.channels import ChannelManager
from agentcron.domain.jobs import JobPolicy, NewJob
from agentcron.domain.notify import Notify
from agentcron.schedule import parse_when
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory, Recorder
from tests.helpers.channels import RecordingChannel
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)

TOKEN = "test-token"
KEY = "websocket:abc"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron()  # the recorder runner


@pytest.fixture
async def manager(cron: AgentCron) -> AsyncIterator[ChannelManager]:
    # A real manager with the recording channel: it gets what the manager routes.
    started = ChannelManager(cron, [RecordingChannel()])
    await started.start()
    yield started
    await started.stop(grace=1.0)


@pytest.fixture
def channel(manager: ChannelManager) -> RecordingChannel:
    (own,) = manager.channels
    assert isinstance(own, RecordingChannel)
    return own


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def replies(recorder: Recorder, *texts: str | None) -> None:
    """The runner answers each fire with the next of `texts`."""
    queue = list(texts)

    async def next_reply(trigger: Trigger) -> str | None:
        return queue.pop(0)

    recorder.result = next_reply


async def fire(
    api: httpx.AsyncClient, cron: AgentCron, manager: ChannelManager, job_id: str
) -> dict[str, Any]:
    """Run the job now, to its end and its channel sends; its run as the API shows it."""
    run = answer(await api.post(f"/api/jobs/{job_id}/run"), 202)
    await wait_settled(cron.engine)
    clock = cron.clock
    assert isinstance(clock, FakeClock)
    clock.advance(timedelta(seconds=1))  # the next run ends later
    await manager.idle()
    return answer(await api.get(f"/api/runs/{run['id']}"))  # type: ignore[no-any-return]


async def a_job(api: httpx.AsyncClient, **kw: Any) -> dict[str, Any]:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    body = {"session_key": KEY, "name": "watch", "message": "look", "when": "every day at 9"}
    return answer(await api.post("/api/jobs", json=body | kw), 201)  # type: ignore[no-any-return]


async def test_changes_holds_an_outcome_equal_to_the_last_delivered_one(
    api: httpx.AsyncClient,
    cron: AgentCron,
    recorder: Recorder,
    manager: ChannelManager,
    channel: RecordingChannel,
) -> None:
    job = await a_job(api, notify="changes")
    assert job["policy"]["notify"] == "changes"
    replies(recorder, "A", "A", "B", "[SILENT] nothing new", "B", "A")
    runs = [await fire(api, cron, manager, job["id"]) for _ in range(6)]
    # What went out: each change once; the silent one and the repeats were held.
    assert [m.text for m in channel.got] == ["A", "B", "A"]
    assert [r["delivery"] for r in runs] == [
        {"notify": "changes", "delivered": True},
        {"notify": "changes", "delivered": False, "held": "unchanged"},
        {"notify": "changes", "delivered": True},
        {"notify": "changes", "delivered": False, "held": "silent"},
        {"notify": "changes", "delivered": False, "held": "unchanged"},
        {"notify": "changes", "delivered": True},
    ]
    # Every outcome is kept, the sentinel stripped from what is shown.
    assert [r["output"] for r in runs] == ["A", "A", "B", "nothing new", "B", "A"]
    messages = answer(await api.get(f"/api/sessions/{KEY}/messages"))["messages"]
    closings = [m for m in messages if m["role"] == "assistant"]
    assert [m["content"] for m in closings] == ["A", "A", "B", "nothing new", "B", "A"]
    assert [m["meta"].get("held") for m in closings] == [
        None, "unchanged", None, "silent", "unchanged", None,
    ]  # fmt: skip


async def test_never_empty_and_the_default_hold_only_what_they_say(
    api: httpx.AsyncClient,
    cron: AgentCron,
    recorder: Recorder,
    manager: ChannelManager,
    channel: RecordingChannel,
) -> None:
    quiet = await a_job(api, notify="never-empty")
    loud = answer(await api.post("/api/jobs", json={
        "session_key": KEY, "name": "loud", "message": "talk", "when": "every day at 9",
    }), 201)  # fmt: skip
    assert loud["policy"]["notify"] == "always"
    replies(recorder, None, "found one", None, "[SILENT]", "  [SILENT]  all quiet")
    empty = await fire(api, cron, manager, quiet["id"])
    found = await fire(api, cron, manager, quiet["id"])
    said = await fire(api, cron, manager, loud["id"])  # always: an empty outcome goes out too
    silent = await fire(api, cron, manager, loud["id"])
    quiet_silent = await fire(api, cron, manager, quiet["id"])
    assert (empty["state"], empty["delivery"]) == (
        "empty",
        {"notify": "never-empty", "delivered": False, "held": "empty"},
    )
    assert found["delivery"] == {"notify": "never-empty", "delivered": True}
    assert said["delivery"] is None  # always, not silent: the run record as before notify
    # A bare sentinel is an empty outcome, held as silent whatever the policy.
    assert (silent["state"], silent["output"]) == ("empty", None)
    assert silent["delivery"] == {"notify": "always", "delivered": False, "held": "silent"}
    assert quiet_silent["output"] == "all quiet"
    assert quiet_silent["delivery"]["held"] == "silent"
    texts = [m.text for m in channel.got]
    assert texts == ["found one", "Scheduled automation “loud” ran and had nothing to report."]


async def test_notify_is_changed_by_patch_and_refused_when_unknown(
    api: httpx.AsyncClient,
    cron: AgentCron,
    recorder: Recorder,
    manager: ChannelManager,
    channel: RecordingChannel,
) -> None:
    job = await a_job(api)
    replies(recorder, "same", "same")
    assert (await fire(api, cron, manager, job["id"]))["delivery"] is None
    patched = answer(await api.patch(f"/api/jobs/{job['id']}", json={"notify": "changes"}))
    assert patched["policy"]["notify"] == "changes"
    assert (await cron.jobs.get(job["id"])).policy.notify is Notify.CHANGES
    # The run from before the change counts as delivered: its repeat is held.
    held = await fire(api, cron, manager, job["id"])
    assert held["delivery"] == {"notify": "changes", "delivered": False, "held": "unchanged"}
    assert [m.text for m in channel.got] == ["same"]
    bad = await api.patch(f"/api/jobs/{job['id']}", json={"notify": "sometimes"})
    assert bad.status_code == 422
    assert "notify" in bad.text
    null = await api.patch(f"/api/jobs/{job['id']}", json={"notify": None})
    assert null.status_code == 422


async def test_a_delivery_job_holds_before_the_evaluate_step(
    api: httpx.AsyncClient,
    cron: AgentCron,
    recorder: Recorder,
    manager: ChannelManager,
    channel: RecordingChannel,
) -> None:
    (job,) = await cron.jobs.create_many([
        NewJob(
            name="report", spec=parse_when("every day at 9", cron.clock.now(), "UTC"),
            message="report", deliver=True, channel="mine", to="1",
            policy=JobPolicy(notify=Notify.CHANGES),
        )
    ])  # fmt: skip
    assert job.session_key is None
    assert job.has_target_fields
    replies(recorder, "up 3%", "up 3%", "[SILENT] up 4%", "up 4%")
    runs = [await fire(api, cron, manager, job.id) for _ in range(4)]
    first, repeat, silent, changed = (r["delivery"] for r in runs)
    assert (first["delivered"], first["notify"]) == (True, "changes")
    assert first["evaluated"]["deliver"] is True
    assert repeat == {"notify": "changes", "delivered": False, "held": "unchanged"}
    assert silent == {"notify": "changes", "delivered": False, "held": "silent"}
    assert changed["delivered"] is True
    assert [r["output"] for r in runs] == ["up 3%", "up 3%", "up 4%", "up 4%"]
    got = [(m.session_key, m.text) for m in channel.got if m.session_key == "mine:1"]
    assert got == [("mine:1", "up 3%"), ("mine:1", "up 4%")]


async def test_the_agent_s_cron_tool_adds_a_job_with_its_policy(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    deps = ToolDeps(jobs=app.jobs, now=clock.now(), session_key=KEY)
    text = await cron_tool(
        SimpleNamespace(deps=deps), "add", name="inbox", when="every 2h", message="check mail",
        notify="changes",
    )  # fmt: skip
    assert text.startswith("Scheduled “inbox”")
    plain = await cron_tool(SimpleNamespace(deps=deps), "add", when="every 3h", message="tidy")
    assert plain.startswith("Scheduled")
    policies = {j.name: j.policy.notify for j in await app.jobs.list()}
    assert policies == {"inbox": Notify.CHANGES, "tidy": Notify.ALWAYS}


def test_the_cli_adds_a_job_with_its_policy(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    add = ("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
           "--when", "every weekday at 9", "--db", db, "--json")  # fmt: skip
    added = cli(*add, "--notify", "never-empty")
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout)
    assert job["policy"]["notify"] == "never-empty"
    shown = cli("jobs", "show", job["id"], "--db", db)
    assert "sends no empty result" in shown.stdout
    wrong = cli(*add, "--notify", "sometimes")
    assert wrong.exit_code == 2
    assert "sometimes" in wrong.output
