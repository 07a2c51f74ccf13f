"""A delivery job's gate and what a fire's prompt says about the silent sentinel, through REST
and the library, on SQLite and PostgreSQL: the gate of a delivery job (an isolated run) asks
before its run as a session turn's does (skipped with the reason `gate`, failed on a gate
error, the gate alone with `no_llm`, a notice to its target), and hands its output to the
runner; a job whose notify policy holds outcomes (`changes`, `never-empty`) is told about
`[SILENT]` in the prompt its runner receives, and only such a job.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.channels import ChannelManager
from agentcron.config.engine import EngineSettings
from agentcron.domain.gates import Gate, GateKind
from agentcron.domain.jobs import Job, JobPolicy, NewJob
from agentcron.domain.notify import SILENT_SENTINEL, Notify
from agentcron.schedule import parse_when
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.channels import RecordingChannel

TOKEN = "test-token"
KEY = "websocket:quiet"
PY = sys.executable


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


class PromptAgent:
    """A runner that keeps the prompt of every turn it is given and answers "found 3"."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.prompts.append(turn.prompt)
        return Outcome.succeeded("found 3")


@pytest.fixture
def agent() -> PromptAgent:
    return PromptAgent()


@pytest.fixture
async def cron(make_cron: CronFactory, agent: PromptAgent) -> AgentCron:
    return await make_cron(runner=agent, settings=EngineSettings(gates=True))


@pytest.fixture
async def manager(cron: AgentCron) -> AsyncIterator[ChannelManager]:
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


async def fire(
    api: httpx.AsyncClient, cron: AgentCron, manager: ChannelManager, job_id: str
) -> dict[str, Any]:
    """Run the job now, to its end and its channel's sends; its run as the API shows it."""
    run = answer(await api.post(f"/api/jobs/{job_id}/run"), 202)
    await wait_settled(cron.engine)
    clock = cron.clock
    assert isinstance(clock, FakeClock)
    clock.advance(timedelta(seconds=1))
    await manager.idle()
    return answer(await api.get(f"/api/runs/{run['id']}"))  # type: ignore[no-any-return]


def command(code: str, **kw: Any) -> dict[str, Any]:
    return {"kind": "command", "target": [PY, "-c", code]} | kw


async def delivery_job(cron: AgentCron, gate: Gate | None, notify: Notify = Notify.ALWAYS) -> Job:
    (job,) = await cron.jobs.create_many([
        NewJob(
            name="orders", spec=parse_when("every day at 9", cron.clock.now(), "UTC"),
            message="Sum up the new orders.", deliver=True, channel="mine", to="1",
            policy=JobPolicy(gate=gate, notify=notify),
        )
    ])  # fmt: skip
    assert job.session_key is None
    return job


async def test_a_delivery_job_s_gate_asks_before_its_run(
    api: httpx.AsyncClient,
    cron: AgentCron,
    agent: PromptAgent,
    manager: ChannelManager,
    channel: RecordingChannel,
) -> None:
    no = Gate(GateKind.COMMAND, (PY, "-c", "print('no orders'); raise SystemExit(1)"))
    job = await delivery_job(cron, no)
    skipped = await fire(api, cron, manager, job.id)
    assert (skipped["state"], skipped["error"]) == ("skipped", "gate")
    assert skipped["output"] == "no orders\n"
    assert skipped["delivery"] == {"gate": {"verdict": "skip"}}
    assert agent.prompts == []
    # A "yes": the run goes on with the gate's output below the task, and is delivered.
    answer(await api.patch(f"/api/jobs/{job.id}", json={"gate": command("print('3 new')")}))
    ran = await fire(api, cron, manager, job.id)
    assert ran["state"] == "succeeded"
    assert ran["delivery"]["gate"] == {"verdict": "run"}
    assert ran["delivery"]["delivered"] is True
    (prompt,) = agent.prompts
    assert prompt == "Sum up the new orders.\n\nWhat the pre-check reported:\n3 new\n"
    # A gate error fails the run with what the gate wrote; the runner is not called.
    failing = command("import sys; sys.stderr.write('no db'); sys.exit(3)")
    answer(await api.patch(f"/api/jobs/{job.id}", json={"gate": failing}))
    failed = await fire(api, cron, manager, job.id)
    assert (failed["state"], failed["error"]) == ("failed", "the gate failed: exit code 3: no db")
    # no_llm: the gate is the whole job.
    only = command("print('pruned 4')", no_llm=True)
    answer(await api.patch(f"/api/jobs/{job.id}", json={"gate": only}))
    done = await fire(api, cron, manager, job.id)
    assert (done["state"], done["output"], done["error"]) == ("succeeded", "pruned 4\n", None)
    assert done["delivery"] == {"gate": {"verdict": "run"}}
    assert len(agent.prompts) == 1
    # A notice gate's skip sends one short notice to the job's target.
    notice = command("print('queue empty'); raise SystemExit(1)", notice=True)
    answer(await api.patch(f"/api/jobs/{job.id}", json={"gate": notice}))
    noticed = await fire(api, cron, manager, job.id)
    assert noticed["state"] == "skipped"
    assert noticed["delivery"]["notice"]["delivered"] is True
    sent = [m.text for m in channel.got if m.session_key == "mine:1"]
    assert sent == ["found 3", "Scheduled automation “orders” did not run: its gate found "
                    "nothing to do.\nqueue empty"]  # fmt: skip
    assert len(agent.prompts) == 1
    # The job goes on at its schedule after every one of them.
    assert (await cron.jobs.get(job.id)).next_fire_at is not None


async def test_only_a_job_that_holds_outcomes_is_told_about_the_silent_sentinel(
    api: httpx.AsyncClient, cron: AgentCron, agent: PromptAgent, manager: ChannelManager
) -> None:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    body = {"session_key": KEY, "message": "look", "when": "every day at 9"}
    told = {}
    for notify in ("always", "changes", "never-empty"):
        job = answer(
            await api.post("/api/jobs", json=body | {"name": notify, "notify": notify}), 201
        )
        run = await fire(api, cron, manager, job["id"])
        assert run["state"] == "succeeded"
        told[notify] = SILENT_SENTINEL in agent.prompts[-1]
        assert agent.prompts[-1] == run["prompt"]
        assert run["prompt_ref"]["version"] == 2
    assert told == {"always": False, "changes": True, "never-empty": True}
    # A delivery job's prompt too (its task is the whole prompt): only when it holds outcomes.
    for notify in (Notify.ALWAYS, Notify.NEVER_EMPTY):
        job = await delivery_job(cron, None, notify)
        await fire(api, cron, manager, job.id)
        told[f"delivery {notify}"] = SILENT_SENTINEL in agent.prompts[-1]
    assert told["delivery always"] is False
    assert told["delivery never-empty"] is True
    assert agent.prompts[-2] == "Sum up the new orders."
