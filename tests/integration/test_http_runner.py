"""Your own agent over HTTP: agentcron POSTs each turn, signed, to the example agent of
`examples/http_agent/app.py`, started as a real process (uvicorn), and to small servers of
the tests' own for the failures (a 500, an agent that never answers, one not up yet).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from standardwebhooks import Webhook

from agentcron.app import AgentCron
from agentcron.domain.events import ApprovalRequested, Event
from agentcron.domain.states import RunState, TurnState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from agentcron.tokens import new_runner_secret
from tests.conftest import CronFactory
from tests.helpers.ws import TOKEN, free_port, listening, login, until, wait_for

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "http_agent"
SECRET = new_runner_secret()
KEY = "websocket:remote"


def _up(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def example_agent(*, stream: bool = False, agentcron: str = "") -> Iterator[str]:
    """The example agent in its own process (uvicorn); yields its turn URL."""
    port = free_port()
    env = {**os.environ, "AGENTCRON_RUNNER_SECRET": SECRET, "AGENTCRON_URL": agentcron}
    env["STREAM"] = "1" if stream else "0"
    command = [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port)]
    command += ["--log-level", "warning", "--app-dir", str(EXAMPLE)]
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    try:
        started = 0
        while not _up(port):  # a real process starting: wait for its socket
            if process.poll() is not None:
                raise AssertionError(f"the example agent exited with {process.returncode}")
            started += 1
            if started > 600:
                raise AssertionError("the example agent did not start within 30s")
            _wait_exit(process, 0.05)
        yield f"http://127.0.0.1:{port}/turn"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()  # a request it still serves must not hold the test
            process.wait(10)


def _wait_exit(process: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait up to `seconds` for the process to exit (it should not): one bounded poll step."""
    with suppress(subprocess.TimeoutExpired):
        process.wait(seconds)


async def remote_cron(make_cron: CronFactory, url: str, **kw: object) -> AgentCron:
    return await make_cron(runner=None, runner_url=url, runner_secret=SECRET, **kw)


async def test_a_scheduled_fire_and_a_user_message_run_on_the_example_agent(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    with example_agent() as url:
        cron = await remote_cron(make_cron, url)
        job = await cron.jobs.create(
            name="stretch", when="in 1m", message="stand up", session_key="chat:1"
        )
        clock.advance(timedelta(minutes=1))
        await wait_settled(cron.engine)
        [run] = await cron.runs.list(job.id)
        assert run.state is RunState.SUCCEEDED
        assert run.output is not None
        assert "stand up" in run.output
        turn = await cron.sessions.send("chat:1", "hello there")
        done = await cron.sessions.wait_turn(turn.id, 10)
        assert done.state is TurnState.SUCCEEDED
        assert done.usage is not None
        assert done.usage["input_tokens"] == 1
        said = [m.content for m in await cron.sessions.messages("chat:1")]
        assert said[-1] == "You said: hello there"


async def test_a_streamed_answer_reaches_a_websocket_client_live(make_cron: CronFactory) -> None:
    with example_agent(stream=True) as url:
        cron = await remote_cron(make_cron, url)
        await cron.sessions.create(KEY)
        async with listening(create_app(cron, token=TOKEN)) as port:
            ws = await login(f"ws://127.0.0.1:{port}/api/ws")
            await ws.send(json.dumps({"type": "subscribe", "session_key": KEY}))
            await until(ws, lambda f: f["type"] == "subscribed")
            await ws.send(json.dumps({"type": "message", "session_key": KEY, "content": "hi"}))
            frames = await until(ws, lambda f: f["type"] == "stream_end", limit=15)
            deltas = [f["text"] for f in frames if f["type"] == "text_delta"]
            assert len(deltas) > 1  # in pieces, as they came
            assert "".join(deltas) == "You said: hi"
            assert frames[-1]["status"] == "succeeded"
            await ws.close()


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_the_agent_asks_a_person_and_reports_its_tool_call(
    make_cron: CronFactory, decision: str
) -> None:
    cron = await make_cron(runner=None, runner_url="http://127.0.0.1:1/turn", runner_secret=SECRET)
    async with listening(create_app(cron, token=TOKEN)) as port:
        with example_agent(stream=True, agentcron=f"http://127.0.0.1:{port}") as url:
            assert cron.http_runner is not None
            assert cron.http_runner.main is not None
            cron.http_runner.main.url = url  # the example needs our port, we its URL
            asked: list[Event] = []
            cron.subscribe(asked.append, [ApprovalRequested])
            turn = await cron.sessions.send(KEY, "!rm -rf /tmp/x")
            await wait_for(lambda: asked, 15)  # written, then told
            [pending] = await cron.approvals.list(KEY)
            assert cron.status().awaiting_approval == 1
            assert (pending.tool, pending.args, pending.turn_id) == (
                "shell",
                {"command": "rm -rf /tmp/x"},
                turn.id,
            )
            assert cron.status().turns_in_runner == 0  # the slot is given back meanwhile
            await cron.approvals.decide(pending.id, decision, by="ann")  # type: ignore[arg-type]
            done = await cron.sessions.wait_turn(turn.id, 10)
    assert done.state is TurnState.SUCCEEDED
    entries = await cron.sessions.messages(KEY)
    [tool] = [m for m in entries if m.role == "tool"]
    approved = decision == "approve"
    assert tool.meta["name"] == "shell"
    assert tool.content == ("ran" if approved else "denied")
    assert entries[-1].content == ("Done." if approved else "I was not allowed to.")


async def test_a_turn_stopped_while_its_agent_asks_ends_the_approval(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(runner=None, runner_url="http://127.0.0.1:1/turn", runner_secret=SECRET)
    async with listening(create_app(cron, token=TOKEN)) as port:
        with example_agent(agentcron=f"http://127.0.0.1:{port}") as url:
            assert cron.http_runner is not None
            assert cron.http_runner.main is not None
            cron.http_runner.main.url = url
            asked: list[Event] = []
            cron.subscribe(asked.append, [ApprovalRequested])
            turn = await cron.sessions.send(KEY, "!reboot")
            await wait_for(lambda: asked, 15)
            assert await cron.sessions.stop(KEY)
            done = await cron.sessions.wait_turn(turn.id, 10)
            assert done.state is TurnState.CANCELLED
            [approval] = await cron.approvals.list(KEY, pending_only=False)
            assert approval.state.value == "expired"  # nothing it asked for runs later
            assert cron.status().awaiting_approval == 0
            assert cron.status().turns_in_runner == 0


async def test_the_callback_needs_the_runner_secret_and_a_running_turn(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(runner=None, runner_url="http://127.0.0.1:1/turn", runner_secret=SECRET)
    async with listening(create_app(cron, token=TOKEN)) as port, httpx.AsyncClient() as client:
        ask = f"http://127.0.0.1:{port}/api/runner/approvals"
        body = {"turn_id": "t-1", "tool": "shell", "args": {}}
        wrong = await client.post(ask, json=body, headers={"authorization": f"Bearer {TOKEN}"})
        assert wrong.status_code == 401
        unknown = await client.post(ask, json=body, headers={"authorization": f"Bearer {SECRET}"})
        assert unknown.status_code == 404
        assert "t-1" in unknown.json()["detail"]
        schema_url = f"http://127.0.0.1:{port}/api/schema/runner.json"
        schema = (await client.get(schema_url, headers={"authorization": f"Bearer {TOKEN}"})).json()
        assert set(schema["answer"]["sse"]) == {"delta", "thinking", "tool", "done", "error"}
        assert "turn_id" in schema["request"]["properties"]


def failing_agent(release: asyncio.Event, bodies: list[dict[str, Any]]) -> FastAPI:
    """An agent that answers 500 with a long body, or never answers (until the test ends)."""
    app = FastAPI()

    @app.post("/fail")
    async def fail() -> PlainTextResponse:
        return PlainTextResponse("x" * 5000, status_code=500)

    @app.post("/hang")
    async def hang() -> PlainTextResponse:
        await release.wait()
        return PlainTextResponse("too late")

    @app.post("/turn")
    async def turn(request: Request) -> dict[str, str]:
        bodies.append(await request.json())
        return {"text": f"got {request.headers['webhook-id']}"}

    return app


@asynccontextmanager
async def agent_on(
    port: int | None = None,
) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    release = asyncio.Event()
    bodies: list[dict[str, Any]] = []
    async with listening(failing_agent(release, bodies), port=port) as bound:
        try:
            yield f"http://127.0.0.1:{bound}", bodies
        finally:
            release.set()


async def test_a_500_and_a_timeout_are_failed_runs_with_the_status_and_an_excerpt(
    make_cron: CronFactory,
) -> None:
    async with agent_on() as (base, bodies):
        cron = await make_cron(runner=None, runner_url=f"{base}/fail", runner_secret=SECRET)
        job = await cron.jobs.create(name="one", when="in 1h", message="go", session_key="chat:2")
        run = await cron.runs.wait((await cron.runs.run_now(job.id)).id, 10)
        assert run.state is RunState.FAILED
        assert run.error is not None
        assert run.error.startswith("the runner answered 500")
        assert run.error_details is not None
        assert run.error_details["status"] == 500
        assert run.error_details["body"] == "x" * 1024  # bounded

        assert cron.http_runner is not None
        assert cron.http_runner.main is not None
        cron.http_runner.main.url = f"{base}/hang"
        cron.http_runner.main.timeout = 0.3
        run = await cron.runs.wait((await cron.runs.run_now(job.id)).id, 10)
        assert run.state is RunState.FAILED
        assert run.error == "the runner did not answer within 0.3s"

        cron.http_runner.main.url = f"{base}/turn"
        run = await cron.runs.wait((await cron.runs.run_now(job.id)).id, 10)
        assert run.state is RunState.SUCCEEDED
        [sent] = bodies
        assert sent["run_id"] == run.id
        assert sent["trigger"]["job_id"] == job.id
        assert sent["trigger"]["prompt_ref"] == run.prompt_ref  # the fire's template


async def test_a_refused_connection_is_tried_again_until_the_agent_is_up(
    make_cron: CronFactory, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    cron = await make_cron(
        runner=None, runner_url=f"http://127.0.0.1:{port}/turn", runner_secret=SECRET
    )
    turn = await cron.sessions.send("chat:3", "are you there")
    await wait_for(lambda: "could not be reached" in caplog.text, 10)  # refused once at least
    async with agent_on(port):
        done = await cron.sessions.wait_turn(turn.id, 15)
    assert done.state is TurnState.SUCCEEDED
    said = [m.content for m in await cron.sessions.messages("chat:3")]
    assert said[-1] == f"got {turn.id}"  # webhook-id: the turn id


async def test_the_example_refuses_a_bad_signature() -> None:
    with example_agent() as url:
        body = json.dumps({"session_key": "a:b", "turn_id": "t-9", "run_id": None,
                           "source": "user", "prompt": "hi", "trigger": None,
                           "system_context": None})  # fmt: skip
        now = datetime.now(UTC)
        good = Webhook(SECRET).sign("t-9", now, body)
        other = Webhook(new_runner_secret()).sign("t-9", now, body)
        async with httpx.AsyncClient() as client:
            for signature, status in ((other, 401), (good, 200)):
                headers = {
                    "content-type": "application/json",
                    "webhook-id": "t-9",
                    "webhook-timestamp": str(int(now.timestamp())),
                    "webhook-signature": signature,
                }
                answer = await client.post(url, content=body, headers=headers)
                assert answer.status_code == status
        assert answer.json()["text"] == "You said: hi"
