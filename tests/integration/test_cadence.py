"""Adaptive cadence and the policy hook, through the library with the built-in agent on a
scripted model that calls the cron tool: a move within the job's bounds is kept (also across
a restart) and recorded on the run; one outside them, or of a job without bounds, is refused
with the reason as the tool's result; the policy hook (Python, and HTTP against a real local
server that verifies the signature) allows, changes or refuses, and fails closed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from standardwebhooks import Webhook

from agentcron import AgentCron
from agentcron.config import Settings
from agentcron.domain.cadence import CadenceBounds
from agentcron.domain.policy import Allow, Change, PolicyAction, PolicyRequest, Refuse
from agentcron.domain.states import RunState
from agentcron.schedule import EverySpec
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)

HOUR = timedelta(hours=1)
KEY = "websocket:chat-1"
SECRET = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGhlLXBvbGljeS1ob29r"


def scripted(calls: list[dict[str, Any]]) -> FunctionModel:
    """A model that, when a turn begins, calls the cron tool with the next of `calls` (none
    left: it just answers), then answers with what the tool said.
    """

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            yield f"tool: {returns[0].content}"
            return
        if not calls:
            yield "nothing to do"
            return
        args = json.dumps(calls.pop(0))
        yield {0: DeltaToolCall("cron", args, tool_call_id=f"call-{len(calls)}")}

    return FunctionModel(stream_function=stream)


async def start(make_cron: CronFactory, calls: list[dict[str, Any]], **kw: Any) -> AgentCron:
    cron = await make_cron(runner=None, model=scripted(calls), **kw)
    await cron.sessions.create(KEY)
    return cron


async def say(cron: AgentCron, text: str) -> str:
    turn = await cron.sessions.send(KEY, text)
    await wait_settled(cron.engine)
    done = await cron.sessions.turn(turn.id)
    reply = next(m for m in await cron.sessions.messages(KEY) if m.id == done.reply_message_id)
    return reply.content


async def advance(cron: AgentCron, clock: FakeClock, delta: timedelta) -> None:
    clock.advance(delta)
    await wait_settled(cron.engine)


BOUNDS = CadenceBounds.of("30m", "6h")


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL (the moved fire is the store's due time on both)."""
    return str(request.param)


async def test_a_move_within_bounds_is_kept_across_a_restart_and_on_the_run(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    calls: list[dict[str, Any]] = []
    cron = await start(make_cron, calls)
    job = await cron.jobs.create(
        name="inbox", when="every 1h", message="check", session_key=KEY, cadence=BOUNDS
    )
    assert job.next_fire_at == T0 + HOUR
    # The fire's turn moves its own job (no name: "this job"), 3 hours from now.
    calls.append({"action": "reschedule", "delay": "3h", "reason": "the inbox is quiet"})
    await advance(cron, clock, HOUR)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    assert run.output is not None
    assert run.output.startswith("tool: Moved the next run")
    moved = await cron.jobs.get(job.id)
    assert (moved.next_fire_at, moved.next_run_at) == (T0 + 4 * HOUR, T0 + 4 * HOUR)
    assert moved.moved is not None
    assert moved.moved.reason == "the inbox is quiet"
    (note,) = run.reschedules or []
    assert note["from"] == (T0 + 2 * HOUR).isoformat()
    assert note["to"] == (T0 + 4 * HOUR).isoformat()
    assert (note["reason"], note["run_id"], note["job_id"]) == (
        "the inbox is quiet",
        run.id,
        job.id,
    )

    await cron.close()
    again = await start(make_cron, calls)  # a new process on the same database
    assert (await again.jobs.get(job.id)).next_fire_at == T0 + 4 * HOUR
    await advance(again, clock, 2 * HOUR)  # 14:00 and 15:00 of the hourly grid: moved away
    assert len(await again.runs.list(job.id)) == 1
    await advance(again, clock, HOUR)
    latest, _ = await again.runs.list(job.id)
    assert (latest.fire_at, latest.state) == (T0 + 4 * HOUR, RunState.SUCCEEDED)
    after = await again.jobs.get(job.id)
    assert after.next_fire_at == T0 + 5 * HOUR  # its usual cadence again
    assert after.moved is None
    assert after.rescheduled is not None


async def test_a_move_out_of_bounds_or_of_a_job_without_bounds_is_refused_with_the_reason(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    calls: list[dict[str, Any]] = []
    cron = await start(make_cron, calls)
    bounded = await cron.jobs.create(
        name="inbox", when="every 1h", message="check", session_key=KEY, cadence=BOUNDS
    )
    free = await cron.jobs.create(name="news", when="every 2h", message="read", session_key=KEY)
    calls += [
        {"action": "reschedule", "name": "inbox", "delay": "10m", "reason": "soon"},
        {"action": "reschedule", "name": "inbox", "delay": "7h", "reason": "late"},
        {"action": "reschedule", "name": "news", "delay": "1h", "reason": "why not"},
        {"action": "reschedule", "name": "inbox", "delay": "2h"},
    ]
    assert "sooner than cadence_min allows" in await say(cron, "move it")
    assert "later than cadence_max allows" in await say(cron, "move it")
    assert "has no cadence bounds" in await say(cron, "move it")
    assert "needs a `reason`" in await say(cron, "move it")
    assert (await cron.jobs.get(bounded.id)).next_fire_at == T0 + HOUR
    assert (await cron.jobs.get(free.id)).next_fire_at == T0 + 2 * HOUR


async def test_allowed_hours_are_read_in_the_jobs_zone(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    calls: list[dict[str, Any]] = []
    cron = await start(make_cron, calls)
    job = await cron.jobs.create(
        name="inbox",
        when="every 1h",
        tz="Europe/Berlin",
        message="check",
        session_key=KEY,
        cadence=CadenceBounds.of(allowed_hours="08:00-20:00"),
    )
    # T0 is 12:00 UTC = 13:00 in Berlin: 8 hours on is 21:00 there, 6 hours on 19:00.
    calls += [
        {"action": "reschedule", "job_id": job.id, "delay": "8h", "reason": "tonight"},
        {"action": "reschedule", "job_id": job.id, "delay": "6h", "reason": "this evening"},
    ]
    assert "outside the allowed hours" in await say(cron, "move it")
    assert "Moved the next run" in await say(cron, "move it")
    moved = await cron.jobs.get(job.id)
    assert moved.next_fire_at == T0 + 6 * HOUR
    assert moved.moved is not None
    assert moved.moved.run_id is None


# -- the policy hook ------------------------------------------------------------------------


async def test_a_python_hook_allows_changes_or_refuses_and_the_model_hears_why(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    asked: list[PolicyRequest] = []

    def hook(request: PolicyRequest) -> Allow | Change | Refuse:
        asked.append(request)
        proposal = request.proposal
        if proposal.message and "rm -rf" in proposal.message:
            return Refuse("no destructive automations")
        if proposal.when == "every 5m":
            from dataclasses import replace

            return Change(replace(proposal, when="every 2h"))
        return Allow()

    calls: list[dict[str, Any]] = [
        {"action": "add", "name": "wipe", "when": "every 1h", "message": "rm -rf /tmp"},
        {"action": "add", "name": "poll", "when": "every 5m", "message": "poll the feed"},
        {"action": "add", "name": "tea", "when": "in 10 minutes", "message": "tea"},
    ]
    cron = await start(make_cron, calls, policy_hook=hook)
    refused = await say(cron, "wipe tmp hourly")
    assert "refused by the job policy: no destructive automations" in refused
    assert await cron.jobs.list(session_key=KEY) == []
    assert "Scheduled “poll”" in await say(cron, "poll often")
    assert "Scheduled “tea”" in await say(cron, "tea")
    poll, tea = sorted(await cron.jobs.list(session_key=KEY), key=lambda j: j.name)
    assert poll.spec == EverySpec(seconds=7200, anchor=poll.spec.anchor)  # changed
    assert tea.name == "tea"
    assert [r.action for r in asked] == [PolicyAction.CREATE] * 3
    assert {r.session_key for r in asked} == {KEY}
    # A person's calls (the library, the API, the CLI) do not go through the hook.
    await cron.jobs.create(name="mine", when="every 1h", message="rm -rf x", session_key=KEY)
    assert len(asked) == 3


async def test_a_hook_that_raises_refuses(make_cron: CronFactory, clock: FakeClock) -> None:
    def broken(request: PolicyRequest) -> Allow:
        raise RuntimeError("the policy service is down")

    calls: list[dict[str, Any]] = [{"action": "add", "when": "in 1h", "message": "tea"}]
    cron = await start(make_cron, calls, policy_hook=broken)
    said = await say(cron, "tea in an hour")
    assert "the policy hook could not be asked (it raised RuntimeError" in said
    assert await cron.jobs.list(session_key=KEY) == []


class _Hook(BaseHTTPRequestHandler):
    """The operator's HTTP hook: verifies the signature, then answers `self.server.answer`."""

    server: _HookServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        try:
            Webhook(SECRET).verify(body, dict(self.headers.items()))
        except Exception:
            self.server.unsigned += 1
            self._send(401, b"{}")
            return
        request = json.loads(body)
        self.server.seen.append(request)
        if self.server.hold.is_set():
            self.server.release.wait(30)  # a hook that does not answer in time
        self._send(200, json.dumps(self.server.answer(request)).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


class _HookServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Hook)
        self.seen: list[dict[str, Any]] = []
        self.unsigned = 0
        self.hold = threading.Event()
        self.release = threading.Event()
        self.answer: Any = lambda request: {"decision": "allow"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/policy"


@pytest.fixture
def hook_server() -> Iterator[_HookServer]:
    server = _HookServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def hook_settings(url: str, timeout: str = "5") -> Settings:
    return Settings(
        values={
            "AGENTCRON_POLICY_HOOK": url,
            "AGENTCRON_POLICY_HOOK_SECRET": SECRET,
            "AGENTCRON_POLICY_HOOK_TIMEOUT": timeout,
        }
    )


async def test_an_http_hook_is_signed_and_allows_changes_or_refuses(
    make_cron: CronFactory, clock: FakeClock, hook_server: _HookServer
) -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        proposal = request["proposal"]
        if request["action"] == "reschedule":
            return {"decision": "refuse", "reason": "moves need a ticket"}
        if proposal["when"] == "every 5m":
            return {"decision": "change", "proposal": {**proposal, "when": "every 3h"}}
        return {"decision": "allow"}

    hook_server.answer = answer
    calls: list[dict[str, Any]] = [
        {"action": "add", "name": "poll", "when": "every 5m", "message": "poll"},
        {"action": "add", "name": "tea", "when": "every 1h", "message": "tea"},
        {"action": "reschedule", "name": "tea", "delay": "2h", "reason": "later"},
    ]
    cron = await start(make_cron, calls, config=hook_settings(hook_server.url))
    assert "Scheduled “poll”" in await say(cron, "poll")
    assert "Scheduled “tea”" in await say(cron, "tea")
    assert "refused by the job policy: moves need a ticket" in await say(cron, "later")
    poll, tea = sorted(await cron.jobs.list(session_key=KEY), key=lambda j: j.name)
    assert poll.spec == EverySpec(seconds=3 * 3600, anchor=poll.spec.anchor)
    assert tea.next_fire_at == T0 + HOUR
    assert hook_server.unsigned == 0
    assert [r["action"] for r in hook_server.seen] == ["create", "create", "reschedule"]
    assert hook_server.seen[0]["session_key"] == KEY
    assert hook_server.seen[2]["proposal"]["next_fire_at"] == (T0 + 2 * HOUR).isoformat()


async def test_an_http_hook_that_does_not_answer_in_time_or_fails_refuses(
    make_cron: CronFactory, clock: FakeClock, hook_server: _HookServer
) -> None:
    calls: list[dict[str, Any]] = [
        {"action": "add", "when": "in 1h", "message": "tea"},
        {"action": "add", "when": "in 1h", "message": "tea"},
    ]
    cron = await start(make_cron, calls, config=hook_settings(hook_server.url, "0.2"))
    hook_server.hold.set()
    assert "could not be asked (no answer within 0.2s)" in await say(cron, "tea")
    hook_server.hold.clear()
    hook_server.release.set()
    hook_server.answer = lambda request: {"decision": "maybe"}
    assert "its answer is unreadable" in await say(cron, "tea")
    assert await cron.jobs.list(session_key=KEY) == []


# -- a person sets the bounds: REST and CLI ---------------------------------------------------

TOKEN = "test-token"


async def test_rest_sets_shows_and_clears_the_bounds_and_shows_a_move(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    calls: list[dict[str, Any]] = []
    cron = await start(make_cron, calls)
    app = create_app(cron, token=TOKEN, hook_token="hook")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
    ) as api:
        body = {"session_key": KEY, "name": "inbox", "message": "check", "when": "every 1h"}
        bad = await api.post("/api/jobs", json=body | {"cadence": {"min": "2h", "max": "1h"}})
        assert bad.status_code == 422
        assert "longer than cadence_max" in bad.text
        for wrong in ({}, {"min": "soon"}, {"allowed_hours": "9-5"}, {"colour": "red"}):
            assert (await api.post("/api/jobs", json=body | {"cadence": wrong})).status_code == 422
        made = await api.post(
            "/api/jobs", json=body | {"cadence": {"min": 1800, "max": "6h", "allowed_hours": None}}
        )
        assert made.status_code == 201, made.text
        job = made.json()
        assert job["policy"]["cadence"] == {"min": "30m", "max": "6h", "allowed_hours": None}
        assert job["moved"] is None
        calls.append({"action": "reschedule", "name": "inbox", "delay": "2h", "reason": "calm"})
        await say(cron, "later please")
        shown = (await api.get(f"/api/jobs/{job['id']}")).json()
        assert shown["next_fire_at"] == "2026-11-22T14:00:00Z"
        assert shown["moved"]["reason"] == "calm"
        assert shown["moved"]["from_at"] == "2026-11-22T13:00:00Z"
        cleared = await api.patch(f"/api/jobs/{job['id']}", json={"cadence": None})
        assert cleared.status_code == 200, cleared.text
        assert cleared.json()["policy"]["cadence"] is None
        calls.append({"action": "reschedule", "name": "inbox", "delay": "3h", "reason": "x"})
        assert "has no cadence bounds" in await say(cron, "later again")


def test_the_cli_adds_a_job_with_bounds_and_shows_them(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    add = ("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
           "--when", "every 2h", "--db", db, "--json")  # fmt: skip
    added = cli(*add, "--cadence-min", "30m", "--allowed-hours", "08:00-20:00")
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout)
    assert job["policy"]["cadence"] == {"min": "30m", "max": None, "allowed_hours": "08:00-20:00"}
    shown = cli("jobs", "show", job["id"], "--db", db)
    assert "may move its next run at least 30m ahead, between 08:00-20:00" in shown.stdout
    wrong = cli(*add, "--cadence-max", "forever")
    assert wrong.exit_code == 1
    assert "cadence_max" in wrong.output
