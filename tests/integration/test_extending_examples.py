"""docs/extending.md, run as written: every python block of the page is an example, loaded as a
module of its own and driven against a real AgentCron on SQLite (the offline model or a runner
of the example's own); each test checks what the example is there to show.

The far ends the examples talk to (a chat service, a hosted scheduler) are small in-memory HTTP
services behind httpx's MockTransport; nothing of agentcron's own is replaced.
"""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron import (
    AgentCron,
    ApprovalState,
    Delivery,
    DeliveryState,
    OutboundMessage,
    Outbox,
    RetryPolicy,
    RunState,
    StreamEnd,
    ToolStarted,
    Trigger,
    TurnState,
)
from agentcron.wake.arms import wire_time
from tests.helpers.doc_code import loaded_blocks, python_blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def examples() -> dict[str, str]:
    return python_blocks(PAGE, "example")


@pytest.fixture
def load() -> Iterator[Callable[[str], types.ModuleType]]:
    """Runs one example's code as a module (registered while the test runs)."""
    with loaded_blocks(PAGE, "example") as run:
        yield run


@pytest.fixture(autouse=True)
def _fast_offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCRON_OFFLINE_WPS", "0")  # replies at once, not at reading speed


def test_every_example_of_the_page_is_run_here() -> None:
    tested = {name.removeprefix("test_").replace("_", "-") for name in globals()}
    assert sorted(set(examples()) - tested) == []


async def eventually(check: Callable[[], Any], what: str, within: float = 15.0) -> Any:
    for _ in range(int(within * 100)):
        found = check()
        if found:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


# -- 1. runners ----------------------------------------------------------------------------------


async def test_function_runner(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    example = load("function-runner")
    run, reply = await example.fire_once(str(tmp_path / "cron.db"))
    assert run.state is RunState.SUCCEEDED
    assert run.fire_at == datetime.fromisoformat("2026-01-05T09:00:00+00:00")
    assert reply == "nightly check at 09:00: the build is green"
    # the function's own rule: nothing to report is an empty turn
    trigger = Trigger("r", "j", "j", "agent_turn", "api:ops", "check the disk", run.fire_at)
    assert await example.check_build(trigger) is None


async def test_class_runner(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    example = load("class-runner")
    waiting, transcript = await example.chat(str(tmp_path / "cron.db"))
    # while it waited for the build, the turn held no slot: paused, not in its runner
    assert (waiting.awaiting_approval, waiting.turns_in_runner, waiting.turns_active) == (1, 0, 1)
    assert [(m.role.value, m.content) for m in transcript] == [
        ("user", "hello"),
        ("assistant", "0 earlier messages; say 'build' to start one"),
        ("user", "build"),
        ("tool", "green"),  # the ToolRecord, saved before the reply
        ("assistant", "build api:ops/2: green"),
        ("user", "and now?"),
        ("assistant", "2 earlier messages; say 'build' to start one"),  # read from the history
    ]
    assert transcript[3].meta["name"] == "ci_build"
    assert transcript[3].meta["args"] == {"id": "api:ops/2"}


async def test_class_runner_streams_its_tool_events(
    load: Callable[[str], types.ModuleType], tmp_path: Path
) -> None:
    example = load("class-runner")
    bot = example.BuildBot()
    async with AgentCron(db=str(tmp_path / "cron.db"), runner=bot) as cron:
        seen: list[object] = []
        cron.subscribe(seen.append, types=[ToolStarted, StreamEnd])
        turn = await cron.sessions.send("api:ci", "build")
        await asyncio.wait_for(bot.waiting.wait(), 10)
        bot.finished("api:ci/1", "red")
        ended = await cron.sessions.wait_turn(turn.id, 10)
    assert ended.state is TurnState.SUCCEEDED
    assert [type(e).__name__ for e in seen] == ["ToolStarted", "StreamEnd"]
    assert seen[0].name == "ci_build"  # type: ignore[attr-defined]


# -- 2. a channel --------------------------------------------------------------------------------


class ChatService:
    """The chat service's HTTP API as the channel's attempts reach it: POST /messages."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.refuse_next = 0  # answer that many attempts with a 503 first

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/messages"
        if self.refuse_next:
            self.refuse_next -= 1
            return httpx.Response(503)
        message = json.loads(request.content) | {"key": request.headers["Idempotency-Key"]}
        self.messages.append(message)
        return httpx.Response(201, json={"id": len(self.messages)})

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["kind"] == kind]


async def test_channel(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    example = load("channel")
    service = ChatService()
    transport = httpx.MockTransport(service.handle)
    async with example.chat_bot(str(tmp_path / "cron.db"), "http://chat.test", transport) as (
        cron,
        channel,
    ):
        # a message in: a turn of `chat:42`; its reply out, to chat 42
        await channel.receive("42", "hello")
        (reply,) = await eventually(lambda: service.of("turn"), "the reply")
        assert reply["chat"] == "42"
        assert "offline model" in reply["text"]
        (turn,) = await cron.sessions.turns("chat:42")
        assert (turn.state, turn.source.value) == (TurnState.SUCCEEDED, "user")

        # a gated tool call: the request goes to the chat, a press there decides it
        await channel.receive("42", "use archive_logs with name=build.log")
        (request,) = await eventually(lambda: service.of("approval_requested"), "the request")
        approval_id = request["approval_id"]
        assert request["chat"] == "42"
        assert "archive_logs" in request["text"]
        assert not await channel.press("43", approval_id, "approve", "mallory")  # not its chat
        assert (await cron.approvals.get(approval_id)).pending
        assert await channel.press("42", approval_id, "approve", "ana")
        await eventually(lambda: len(service.of("turn")) == 2, "the tool's turn ends")
        (decided,) = service.of("approval_decided")
        assert "approved" in decided["text"]
        assert "archived build.log" in service.of("turn")[1]["text"]
        approval = await cron.approvals.get(approval_id)
        assert (approval.state, approval.decided_by) == (ApprovalState.APPROVED, "chat:ana")

        # every message is a delivery record, delivered once, with what the service answered
        await channel.outbox.idle()
        records = await cron.deliveries.page(channel="chat")
        assert len(records) == len(service.messages) == 4
        assert {r.state for r in records} == {DeliveryState.DELIVERED}
        assert sorted(r.result["id"] for r in records if r.result) == [1, 2, 3, 4]
        assert len({m["key"] for m in service.messages}) == 4

        # the service down for a moment: the outbox retries the attempt
        service.refuse_next = 1
        channel.outbox.retry = RetryPolicy(initial_delay=0.01)
        await channel.receive("42", "hello again")
        await eventually(lambda: len(service.of("turn")) == 3, "the retried reply")
        await channel.outbox.idle()  # its record is settled too
        retried = await cron.deliveries.page(channel="chat", limit=1)
        assert (retried[0].state, retried[0].attempts) == (DeliveryState.DELIVERED, 2)


# -- 3. an arm client ----------------------------------------------------------------------------


class HostedScheduler:
    """The hosted scheduler's API the example's client speaks: named one-shot schedules."""

    def __init__(self) -> None:
        self.schedules: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer sched-token"
        name = request.url.path.removeprefix("/schedules").strip("/")
        self.calls.append(f"{request.method} {name}".strip())
        if request.method == "GET":
            return httpx.Response(200, json=list(self.schedules.values()))
        if request.method == "PUT":
            body = json.loads(request.content)
            self.schedules[name] = {"name": name, "id": f"s-{name}", **body}
            return httpx.Response(200, json={"id": f"s-{name}"})
        if self.schedules.pop(name, None) is None:
            return httpx.Response(404)
        return httpx.Response(204)


async def _no_turn(trigger: Trigger) -> None:
    return None


async def test_arm_client(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    example = load("arm-client")
    service = HostedScheduler()
    service.schedules["gone"] = {"name": "gone", "id": "s-gone", "at": "2026-01-01T00:00:00+00:00"}
    service.schedules["gone"]["url"] = "https://agent.example/api/cron/fire"
    cron = AgentCron(db=str(tmp_path / "cron.db"), runner=_no_turn)
    arms = example.SchedulerArms(
        "https://scheduler.test", "sched-token", transport=httpx.MockTransport(service.handle)
    )
    wake = example.managed_wake(cron, arms)
    wake.prepare()  # no timer: fires come from the scheduler
    await cron.start()
    try:
        job = await cron.jobs.create(
            name="report", when="every day at 9", message="report", session_key="api:ops"
        )
        await wake.reconcile()  # what a running managed wake does after every job change
        assert list(service.schedules) == [job.id]  # armed; the orphan cancelled
        schedule = service.schedules[job.id]
        due = wire_time(job.next_run_at)
        assert datetime.fromisoformat(schedule["at"]) == due
        assert schedule["url"] == "https://agent.example/api/cron/fire"
        assert schedule["body"] == {"job_id": job.id, "fire_at": due.isoformat()}

        calls = len(service.calls)
        await wake.reconcile()  # nothing moved: a list, no provision
        assert service.calls[calls:] == ["GET"]

        await cron.jobs.pause(job.id)
        await wake.reconcile()
        assert service.schedules == {}
        await cron.jobs.resume(job.id)
        await wake.reconcile()
        assert list(service.schedules) == [job.id]
    finally:
        await wake.stop()
        await cron.close()


async def test_an_unreachable_scheduler_is_an_arm_error(
    load: Callable[[str], types.ModuleType],
) -> None:
    from agentcron import ArmError

    example = load("arm-client")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    arms = example.SchedulerArms("https://scheduler.test", "t", transport=httpx.MockTransport(down))
    with pytest.raises(ArmError, match="GET /schedules: ConnectError"):
        await arms.list()
    await arms.aclose()


class _NoArms:
    """A wake service that holds the arms in memory (the verifier example needs none)."""

    async def provision(self, job_id: str, fire_at: datetime, callback_url: str) -> str:
        return job_id

    async def cancel(self, job_id: str) -> None:
        return None

    async def list(self) -> list[Any]:
        return []

    async def aclose(self) -> None:
        return None


async def test_fire_verifier(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    from agentcron import ManagedWake, WakeSettings, create_app, resolve_wake

    example = load("fire-verifier")
    verifier = example.SharedSecretVerifier("s3cret-of-the-scheduler")
    recorder_calls: list[Trigger] = []

    async def runner(trigger: Trigger) -> None:
        recorder_calls.append(trigger)

    cron = AgentCron(db=str(tmp_path / "cron.db"), runner=runner)
    settings = WakeSettings(provider="managed", callback_url="https://agent.example")
    wake = resolve_wake(
        settings, engine=cron.engine, catalog=cron.store, runs=cron.store,
        subscribe=cron.subscribe, clock=cron.clock, arms=_NoArms(), verifier=verifier,
    )  # fmt: skip
    assert isinstance(wake, ManagedWake)  # no audience, issuer or JWKS needed
    app = create_app(cron, token="api", wake=wake)
    wake.prepare()
    await cron.start()
    await wake.start()
    try:
        job = await cron.jobs.create(
            name="ping", when="in 1 second", message="ping", session_key="api:ops"
        )
        body = {"job_id": job.id, "fire_at": wire_time(job.next_run_at).isoformat()}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:

            async def fire(secret: str, payload: dict[str, Any]) -> int:
                headers = {"Authorization": f"Bearer {secret}"}
                answer = await http.post("/api/cron/fire", json=payload, headers=headers)
                return answer.status_code

            assert await fire("a-guess", body) == 401
            assert await fire("s3cret-of-the-scheduler", {"fire_at": body["fire_at"]}) == 400
            assert await fire("s3cret-of-the-scheduler", body) == 202
            await eventually(lambda: len(recorder_calls) == 1, "the fire's turn")
            assert await fire("s3cret-of-the-scheduler", body) == 202  # a retry: runs nothing
            await eventually(lambda: wake.fires["duplicate"] == 1, "the retry dropped")
        assert len(recorder_calls) == 1
    finally:
        await wake.stop()
        await cron.close()


# -- 4. a store ----------------------------------------------------------------------------------


async def test_store_wrapper(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    example = load("store-wrapper")
    ledger, records = await example.send_audited(str(tmp_path / "cron.db"), ["deployed", "reject"])
    assert ledger.trail == [
        ("ops-log", "m-0", "delivered"),
        ("ops-log", "m-1", "failed: HTTP 400"),
    ]
    delivered, failed = records
    assert (delivered.state, delivered.result) == (DeliveryState.DELIVERED, {"far_end_id": "#1"})
    assert (failed.state, failed.last_error) == (DeliveryState.FAILED, "HTTP 400")


async def test_the_wrapped_ledger_keeps_the_contract(
    load: Callable[[str], types.ModuleType], tmp_path: Path
) -> None:
    """The compare-and-sets of the store still decide through the wrapper: a delivery is
    attempted once per count, settled once, and a lost settle is not audited."""
    example = load("store-wrapper")
    async with AgentCron(db=str(tmp_path / "cron.db"), runner=_no_turn) as cron:
        ledger = example.AuditedDeliveries(cron.store.deliveries)
        now = cron.clock.now()
        _, created = await ledger.enqueue("c", "m", "api:x", {"text": "t"}, now)
        assert created
        assert (await ledger.enqueue("c", "m", "api:x", {}, now))[1] is False
        both = await asyncio.gather(
            *(ledger.begin_attempt("c", "m", attempts=0, now=now) for _ in "ab")
        )
        assert sorted(r is None for r in both) == [False, True]
        assert await ledger.mark_delivered("c", "m", now)
        assert not await ledger.mark_failed("c", "m", error="late", now=now)
        assert ledger.trail == [("c", "m", "delivered")]
        page: list[Delivery] = await ledger.page(channel="c")
        assert [(d.message_id, d.state) for d in page] == [("m", DeliveryState.DELIVERED)]

        # and an Outbox takes it where it takes the store's own
        sent: list[str] = []

        async def attempt(message: OutboundMessage, number: int) -> None:
            sent.append(message.text)

        outbox = Outbox("c2", attempt, deliveries=ledger, clock=cron.clock)
        await outbox.start()
        await outbox.submit(OutboundMessage("api:x", "api", "x", "hi", "m2", "succeeded"))
        await outbox.idle()
        await outbox.stop()
        assert sent == ["hi"]
        assert ledger.trail[-1] == ("c2", "m2", "delivered")


# -- 5. signals ----------------------------------------------------------------------------------


async def test_signals(load: Callable[[str], types.ModuleType], tmp_path: Path) -> None:
    example = load("signals")
    assert await example.watch(str(tmp_path / "cron.db")) == ["from elsewhere"]
