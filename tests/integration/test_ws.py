"""The WebSocket stream on a real server socket: auth, live turns, scheduled turns, replay."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.server import create_app
from agentcron.testing import FakeClock
from tests.conftest import CronFactory
from tests.helpers.ws import TOKEN, listening, login, until

KEY = "websocket:live"


@asynccontextmanager
async def serving(cron: AgentCron) -> AsyncIterator[str]:
    """The API on a real localhost socket in this event loop; yields the ws URL."""
    async with listening(create_app(cron, token=TOKEN)) as port:
        yield f"ws://127.0.0.1:{port}/api/ws"


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron(runner=None, model=OfflineModel(0))


async def test_the_stream_needs_the_token(cron: AgentCron) -> None:
    async with serving(cron) as url:
        for first in ({"type": "auth", "token": "wrong"}, {"type": "subscribe"}):
            ws = await connect(url)
            await ws.send(json.dumps(first))
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 4401
        header = await connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"})
        assert json.loads(await header.recv()) == {"type": "ready"}
        await header.close()


async def test_a_message_over_the_socket_streams_its_turn(cron: AgentCron) -> None:
    await cron.sessions.create(KEY)  # a message over the socket does not create its session
    async with serving(cron) as url:
        ws = await login(url)
        await ws.send(json.dumps({"type": "subscribe", "session_key": KEY}))
        subscribed = json.loads(await ws.recv())
        assert subscribed == {"type": "subscribed", "session_key": KEY, "running_turn": None,
                              "replay": []}  # fmt: skip
        await ws.send(json.dumps({"type": "message", "session_key": KEY, "content": "hi there"}))
        frames = await until(ws, lambda f: f["type"] == "session_sync")
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "accepted"
        assert kinds[1] == "stream_start"
        assert kinds[-2:] == ["stream_end", "session_sync"]
        assert {f["session_key"] for f in frames} == {KEY}
        text = "".join(f["text"] for f in frames if f["type"] == "text_delta")
        assert text.startswith('(offline model) You said: "hi there"')
        await ws.send("not json")
        assert json.loads(await ws.recv()) == {"type": "error",
                                               "detail": "frames must be JSON objects"}  # fmt: skip
        await ws.send(json.dumps({"type": "dance"}))
        error = json.loads(await ws.recv())
        assert error["type"] == "error"
        assert "accepted: subscribe, unsubscribe, message, ping" in error["detail"]
        await ws.close()


async def test_a_scheduled_turn_streams_like_a_user_turn(cron: AgentCron, clock: FakeClock) -> None:
    async with serving(cron) as url:
        watcher = await login(url)  # subscribed to nothing: still gets job updates
        ws = await login(url)
        await ws.send(json.dumps({"type": "subscribe", "session_key": KEY}))
        await until(ws, lambda f: f["type"] == "subscribed")
        job = await cron.jobs.create(name="stretch", when="in 1m", message="stand up",
                                     session_key=KEY)  # fmt: skip
        created = await until(watcher, lambda f: f["type"] == "automation_update")
        assert (created[-1]["action"], created[-1]["job"]["name"]) == ("created", "stretch")
        clock.advance(timedelta(minutes=1))
        frames = await until(ws, lambda f: f.get("action") == "settled")
        kinds = [(f["type"], f.get("action") or f.get("source")) for f in frames]
        assert kinds[0] == ("automation_update", "created")
        assert ("automation_update", "fired") in kinds
        start = kinds.index(("stream_start", "automation"))
        end = [k for k, _ in kinds].index("stream_end")
        assert start < end
        assert all(k == "text_delta" for k, _ in kinds[start + 1 : end])
        text = "".join(f["text"] for f in frames if f["type"] == "text_delta")
        assert text == "(offline model) Reminder: stand up."
        assert frames[-1]["job_id"] == job.id
        assert frames[-1]["status"] == "succeeded"
        seen_by_watcher = await until(watcher, lambda f: f.get("action") == "settled")
        assert "text_delta" not in {f["type"] for f in seen_by_watcher}  # not subscribed
        await ws.close()
        await watcher.close()


async def test_a_gated_call_s_approval_events_go_to_its_session_s_subscribers(
    make_cron: CronFactory,
) -> None:
    def deploy(env: str) -> str:
        """Deploy the app."""
        return f"deployed {env}"

    cron = await make_cron(
        runner=None, model=OfflineModel(0), tools=[UserTool(deploy, requires_approval=True)]
    )
    async with serving(cron) as url:
        ws = await login(url)
        await ws.send(json.dumps({"type": "subscribe", "session_key": KEY}))
        await until(ws, lambda f: f["type"] == "subscribed")
        watcher = await login(url)  # subscribed to nothing: no approval of KEY's
        turn = await cron.sessions.send(KEY, "use deploy with env=staging")
        frames = await until(ws, lambda f: f["type"] == "approval_requested")
        requested = frames[-1]
        assert [f["type"] for f in frames if f["type"].startswith("tool")] == ["tool_started"]
        assert {k: requested[k] for k in ("session_key", "turn_id", "tool", "args")} == {
            "session_key": KEY,
            "turn_id": turn.id,
            "tool": "deploy",
            "args": {"env": "staging"},
        }
        await cron.approvals.decide(requested["approval_id"], "deny", by="ana")
        frames = await until(ws, lambda f: f["type"] == "stream_end")
        (decided,) = [f for f in frames if f["type"] == "approval_decided"]
        assert (decided["approval_id"], decided["state"], decided["decided_by"]) == (
            requested["approval_id"],
            "denied",
            "ana",
        )
        (call,) = [f for f in frames if f["type"] == "tool_call"]
        assert call["result"] == "Denied by ana."
        await watcher.send(json.dumps({"type": "ping"}))
        seen = await until(watcher, lambda f: f["type"] == "pong")
        assert not [f for f in seen if f["type"].startswith("approval")]
        await ws.close()
        await watcher.close()


async def test_a_client_that_reconnects_mid_turn_gets_the_turn_so_far(
    make_cron: CronFactory,
) -> None:
    gate = asyncio.Event()
    paused = asyncio.Event()

    async def sleep(delay: float) -> None:
        paused.set()
        await gate.wait()

    cron = await make_cron(runner=None, model=OfflineModel(10, sleep=sleep))
    async with serving(cron) as url:
        turn = await cron.sessions.send(KEY, "tell me a story")
        await paused.wait()  # the first word is out; the rest waits
        late = await login(url)
        await late.send(json.dumps({"type": "subscribe", "session_key": KEY}))
        (subscribed,) = await until(late, lambda f: f["type"] == "subscribed")
        assert subscribed["running_turn"] == turn.id
        replay = subscribed["replay"]
        assert [e["type"] for e in replay] == ["stream_start", "text_delta"]
        assert replay[1]["text"] == "(offline "
        gate.set()
        rest = await until(late, lambda f: f["type"] == "stream_end")
        text = "".join(e["text"] for e in replay + rest if e["type"] == "text_delta")
        reply = (await cron.sessions.wait_turn(turn.id, 5)).reply_message_id
        messages = await cron.sessions.messages(KEY)
        assert text == next(m.content for m in messages if m.id == reply)
        await late.close()


async def test_a_binary_frame_or_an_unknown_session_gets_an_error_frame(cron: AgentCron) -> None:
    async with serving(cron) as url:
        ws = await login(url)
        await ws.send(b"\x00\x01binary")
        error = json.loads(await ws.recv())
        assert error == {"type": "error",
                         "detail": "binary frames are not read: send JSON objects as text frames"}  # fmt: skip
        await ws.send(json.dumps({"type": "message", "session_key": "websocket:nobody",
                                  "content": "hi"}))  # fmt: skip
        missing = json.loads(await ws.recv())
        assert missing["type"] == "error"
        assert "websocket:nobody" in missing["detail"]
        await ws.send(json.dumps({"type": "subscribe", "session_key": "bad key"}))
        assert "invalid session key" in json.loads(await ws.recv())["detail"]
        await ws.send(json.dumps({"type": "ping"}))  # the connection is still open
        assert json.loads(await ws.recv()) == {"type": "pong"}
        await ws.close()
    assert await cron.sessions.list() == []


async def test_a_binary_first_frame_is_closed_with_a_code(cron: AgentCron) -> None:
    async with serving(cron) as url:
        ws = await connect(url)
        await ws.send(b"\x00")
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 4401


async def test_a_system_event_reaches_every_client_with_its_source(
    cron: AgentCron, clock: FakeClock
) -> None:
    async with serving(cron) as url:
        watching = await login(url)  # subscribed to no session
        await cron.system.ensure(
            "heartbeat", "every 30 minutes", message="heartbeat check", handler=lambda _t: "ok"
        )
        clock.advance(timedelta(minutes=30))
        (*_, frame) = await until(watching, lambda f: f["type"] == "system_event")
        assert frame["session_key"] == ""
        assert (frame["name"], frame["text"], frame["source"]) == (
            "heartbeat", "heartbeat check", "cron",
        )  # fmt: skip
        await watching.close()
