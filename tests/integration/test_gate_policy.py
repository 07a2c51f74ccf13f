"""A job's gate through the tool policy, on SQLite and PostgreSQL, through the library and the
REST API (the built-in agent with the offline model, whose table the gates share; real
subprocesses that write a file when they run): `deny` fails the run without a turn and without
running the gate; `approve` waits for a person (the job's `waiting_approval`, no slot held)
and runs the gate once approved, or fails the run when denied or expired; a standing grant of
the job approves it unasked and its record names the grant; with no policy for the gate's tool
nothing changes. The same for a delivery job's gate (an isolated run).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.config.engine import EngineSettings
from agentcron.domain.approvals import Approval, Policy
from agentcron.domain.events import ApprovalRequested, Event
from agentcron.domain.gates import Gate, GateKind
from agentcron.domain.jobs import JobPolicy, NewJob
from agentcron.schedule import parse_when
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.waiting import until

TOKEN = "test-token"
KEY = "websocket:gated"
PY = sys.executable


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


@dataclass
class World:
    cron: AgentCron
    api: httpx.AsyncClient
    marker: Path  # the gate's command writes it when it runs
    events: list[Event]

    @property
    def argv(self) -> list[str]:
        code = f"open({str(self.marker)!r}, 'a').write('ran\\n'); print('2 new')"
        return [PY, "-c", code]

    async def session_job(self) -> dict[str, Any]:
        answer(await self.api.post("/api/sessions", json={"key": KEY}), 201)
        body = {
            "session_key": KEY,
            "name": "watch",
            "message": "look",
            "when": "every day at 9",
            "gate": {"kind": "command", "target": self.argv},
        }
        return answer(await self.api.post("/api/jobs", json=body), 201)  # type: ignore[no-any-return]

    async def delivery_job(self) -> str:
        clock = self.cron.clock
        (job,) = await self.cron.jobs.create_many([
            NewJob(
                name="orders", spec=parse_when("every day at 9", clock.now(), "UTC"),
                message="Sum up the new orders.", deliver=True, channel="mine", to="1",
                policy=JobPolicy(gate=Gate(GateKind.COMMAND, tuple(self.argv))),
            )
        ])  # fmt: skip
        return job.id

    async def start(self, job_id: str) -> str:
        """Run the job now; its run's id."""
        return str(answer(await self.api.post(f"/api/jobs/{job_id}/run"), 202)["id"])

    async def run(self, run_id: str) -> dict[str, Any]:
        """The run at its end, as the API shows it."""
        await wait_settled(self.cron.engine)
        return answer(await self.api.get(f"/api/runs/{run_id}"))  # type: ignore[no-any-return]

    async def pending(self) -> Approval:
        found: list[Approval] = []

        async def asked() -> bool:
            found[:] = await self.cron.approvals.list(None)
            return bool(found)

        await until(asked, "an approval is requested")
        (approval,) = found
        return approval

    async def decide(self, approval_id: str, decision: str) -> dict[str, Any]:
        body = {"decision": decision, "by": "ops"}
        return answer(await self.api.post(f"/api/approvals/{approval_id}", json=body))  # type: ignore[no-any-return]

    async def transcript(self) -> list[dict[str, Any]]:
        return answer(await self.api.get(f"/api/sessions/{KEY}/messages"))["messages"]  # type: ignore[no-any-return]

    def ran(self) -> int:
        return len(self.marker.read_text().splitlines()) if self.marker.exists() else 0

    def requested(self) -> int:
        return sum(isinstance(e, ApprovalRequested) for e in self.events)


WorldFactory = Callable[..., Awaitable[World]]


@pytest.fixture
async def make_world(make_cron: CronFactory, tmp_path: Path) -> AsyncIterator[WorldFactory]:
    clients: list[httpx.AsyncClient] = []

    async def factory(policy: dict[str, Policy] | None = None, **kw: Any) -> World:
        cron = await make_cron(
            runner=None,
            model=OfflineModel(0),
            tool_policy=policy,
            settings=EngineSettings(gates=True),
            **kw,
        )
        events: list[Event] = []
        cron.subscribe(events.append, types=[ApprovalRequested])
        app = create_app(cron, token=TOKEN, hook_token="hook")
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://t",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        clients.append(client)
        return World(cron, client, tmp_path / "gate-ran", events)

    yield factory
    for client in clients:
        await client.aclose()


async def test_a_denied_gate_fails_its_run_without_running_and_without_a_turn(
    make_world: WorldFactory,
) -> None:
    world = await make_world({"gate.*": "deny"})
    job = await world.session_job()
    run = await world.run(await world.start(job["id"]))
    assert run["state"] == "failed"
    assert run["error"] == (
        "gate denied by the tool policy (gate.command): its policy is deny; the gate did not run"
    )
    assert run["delivery"] == {"gate": {"verdict": "error", "error": run["error"]}}
    assert world.ran() == 0  # the command never ran
    assert await world.transcript() == []  # no turn: nothing was said, nothing answered
    assert await world.cron.approvals.list(None, pending_only=False) == []
    # The job goes on at its schedule.
    assert (await world.cron.jobs.get(job["id"])).next_fire_at is not None


async def test_a_gate_that_needs_approval_waits_for_a_person_and_runs_once_approved(
    make_world: WorldFactory,
) -> None:
    world = await make_world({"gate.command": "approve"})
    job = await world.session_job()
    run_id = await world.start(job["id"])
    approval = await world.pending()
    assert approval.tool == "gate.command"
    assert approval.args == {"target": shlex.join(world.argv), "job_id": job["id"]}
    assert (approval.job_id, approval.session_key) == (job["id"], KEY)
    assert world.ran() == 0  # not before the decision
    # The wait is the job's, holding no slot.
    waiting = answer(await world.api.get(f"/api/jobs/{job['id']}"))["waiting_approval"]
    assert (waiting["id"], waiting["tool"]) == (approval.id, "gate.command")
    assert world.cron.lanes.slots.turns.awaiting_approval == 1
    assert world.cron.lanes.slots.turns.in_runner == 0
    decided = await world.decide(approval.id, "approve")
    assert decided["state"] == "approved"
    run = await world.run(run_id)
    assert run["state"] == "succeeded"
    assert world.ran() == 1
    assert run["delivery"]["gate"] == {"verdict": "run", "approval_id": approval.id}
    assert run["prompt_vars"]["gate_output"] == "2 new\n"
    roles = [m["role"] for m in await world.transcript()]
    assert "assistant" in roles  # the turn happened after the gate
    assert answer(await world.api.get(f"/api/jobs/{job['id']}"))["waiting_approval"] is None
    assert world.cron.lanes.slots.turns.awaiting_approval == 0


async def test_a_denied_or_expired_approval_fails_the_run_and_the_gate_does_not_run(
    make_world: WorldFactory, clock: FakeClock
) -> None:
    world = await make_world({"gate.*": "approve"})
    job = await world.session_job()
    run_id = await world.start(job["id"])
    approval = await world.pending()
    await world.decide(approval.id, "deny")
    run = await world.run(run_id)
    assert run["state"] == "failed"
    assert run["error"] == (
        "gate denied by the tool policy (gate.command): its approval was denied by ops; "
        "the gate did not run"
    )
    assert run["delivery"]["gate"]["approval_id"] == approval.id
    assert world.ran() == 0
    assert await world.transcript() == []
    # Nobody decides: at its timeout the approval expires, and the run fails the same way.
    second = await world.start(job["id"])
    waiting = await world.pending()
    clock.advance(timedelta(minutes=6))  # past the default approval timeout (5 minutes)
    expired = await world.run(second)
    assert expired["state"] == "failed"
    assert "its approval was expired by timeout" in expired["error"]
    assert (await world.cron.approvals.get(waiting.id)).state.value == "expired"
    assert world.ran() == 0


async def test_a_standing_grant_of_the_job_lets_its_gate_run_unasked(
    make_world: WorldFactory,
) -> None:
    world = await make_world({"gate.*": "approve"})
    job = await world.session_job()
    body = {"tool": "gate.command", "args": {"target": f"{PY} -c *"}, "expires_in_s": 3600}
    grant = answer(await world.api.post(f"/api/jobs/{job['id']}/grants", json=body), 201)
    run = await world.run(await world.start(job["id"]))
    assert run["state"] == "succeeded"
    assert world.ran() == 1
    assert world.requested() == 0  # nobody was asked
    (record,) = await world.cron.approvals.list(None, pending_only=False)
    assert (record.tool, record.state.value, record.grant_id) == (
        "gate.command",
        "approved",
        grant["id"],
    )
    assert record.decided_by == f"standing grant {grant['id']}"
    assert run["delivery"]["gate"]["approval_id"] == record.id


async def test_with_no_policy_for_gates_they_run_as_before(make_world: WorldFactory) -> None:
    world = await make_world({"other_tool": "deny"})  # a table that does not name the gates
    job = await world.session_job()
    run = await world.run(await world.start(job["id"]))
    assert run["state"] == "succeeded"
    assert run["delivery"] == {"gate": {"verdict": "run"}}
    assert world.ran() == 1
    assert await world.cron.approvals.list(None, pending_only=False) == []


async def test_a_delivery_job_s_gate_passes_the_same_policy(make_world: WorldFactory) -> None:
    world = await make_world({"gate.command": "deny"})
    job_id = await world.delivery_job()
    denied = await world.run(await world.start(job_id))
    assert denied["state"] == "failed"
    assert denied["error"].startswith("gate denied by the tool policy (gate.command)")
    assert denied["output"] is None  # the runner never ran
    assert world.ran() == 0


async def test_a_delivery_job_s_gate_waits_for_approval_holding_no_slot(
    make_world: WorldFactory,
) -> None:
    world = await make_world({"gate.*": "approve"})
    job_id = await world.delivery_job()
    run_id = await world.start(job_id)
    approval = await world.pending()
    assert (approval.tool, approval.job_id, approval.turn_id) == ("gate.command", job_id, run_id)
    assert approval.session_key == f"cron:{job_id}"
    slots = world.cron.engine.slots.runs
    assert (slots.awaiting_approval, slots.in_runner) == (1, 0)
    waiting = answer(await world.api.get(f"/api/jobs/{job_id}"))["waiting_approval"]
    assert waiting["id"] == approval.id
    await world.decide(approval.id, "approve")
    run = await world.run(run_id)
    assert run["state"] == "succeeded"
    assert run["delivery"]["gate"] == {"verdict": "run", "approval_id": approval.id}
    assert world.ran() == 1
    assert run["output"]  # the runner ran after the gate
    # Denied: the run fails, the gate does not run again.
    second = await world.start(job_id)
    await world.decide((await world.pending()).id, "deny")
    failed = await world.run(second)
    assert failed["state"] == "failed"
    assert "its approval was denied by ops" in failed["error"]
    assert world.ran() == 1
