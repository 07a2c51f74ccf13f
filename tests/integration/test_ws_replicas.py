"""Two `serve` replicas on one PostgreSQL database: a WebSocket client on either sees a
session's turns live wherever they run (the event relay, `server/relay_events.py`).

Two AgentCron instances in this process, each with its own app on a real socket, are two
replicas as far as the database can tell (two connections, two origins). A turn runs on B; a
client on A gets the same frames as a client on B, in order, once each; A's bus, and so its
channels, never see them. On SQLite there is no relay and nothing changes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from websockets.asyncio.client import ClientConnection

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.channels.manager import ChannelManager
from agentcron.domain.events import Event, SystemEventFired
from agentcron.runtime.clock import SystemClock
from agentcron.server import create_app
from agentcron.server.relay_events import LIMIT, MAX_WAITING_BYTES, EventRelay
from agentcron.server.serve import ServeOptions, build
from agentcron.store.signals import Topic
from agentcron.store.sql import SqlStore
from tests.conftest import CronFactory
from tests.helpers.channels import RecordingChannel
from tests.helpers.ws import TOKEN, listening, login, until, wait_for

pytestmark = pytest.mark.slow
KEY = "chat:1"  # a session of the "chat" channel, which both replicas have


@pytest.fixture
def cron_backend(request: pytest.FixtureRequest) -> str:
    """PostgreSQL, unless a test asks for another backend (indirect parametrization); the tests
    on this default carry the `postgres` marker themselves.
    """
    return str(getattr(request, "param", "postgresql"))


def chat_channel() -> RecordingChannel:
    """A channel of one's own that carries the "chat" sessions."""
    return RecordingChannel("chat", wants=lambda m: m.session_key.startswith("chat:"))


@dataclass
class Replica:
    cron: AgentCron
    app: FastAPI
    channel: RecordingChannel
    manager: ChannelManager
    seen: list[Event]  # what this replica's own bus published
    ws_url: str = ""
    http_url: str = ""

    @property
    def relay(self) -> EventRelay:
        relay = self.app.state.hub.relay
        assert relay is not None
        return relay


async def replica(make_cron: CronFactory, **kw: Any) -> Replica:
    """An app with the relay, created before its AgentCron starts (as `serve` does)."""
    cron = await make_cron(start=False, runner=None, clock=SystemClock(), **kw)
    channel = chat_channel()
    manager = ChannelManager(cron, [channel])
    app = create_app(cron, token=TOKEN, channels=manager, relay_events=True)
    seen: list[Event] = []
    cron.subscribe(seen.append)
    await cron.start()
    await manager.start()
    await asyncio.wait_for(cron.store.signals.connected.wait(), 5)
    return Replica(cron, app, channel, manager, seen)


@asynccontextmanager
async def serving(*replicas: Replica) -> AsyncIterator[None]:
    """Each replica's app on a real localhost socket, with its lifespan (the relay's sender
    stops with it); the managers stop after.
    """
    async with AsyncExitStack() as stack:
        for r in replicas:
            stack.push_async_callback(r.manager.stop)
            port = await stack.enter_async_context(listening(r.app, lifespan="on"))
            r.ws_url = f"ws://127.0.0.1:{port}/api/ws"
            r.http_url = f"http://127.0.0.1:{port}"
        yield


async def subscribe(url: str, key: str = KEY) -> tuple[ClientConnection, dict[str, Any]]:
    ws = await login(url)
    await ws.send(json.dumps({"type": "subscribe", "session_key": key}))
    (subscribed,) = await until(ws, lambda f: f["type"] == "subscribed")
    return ws, subscribed


async def post(r: Replica, path: str, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=r.http_url, headers=headers) as client:
        answer = await client.post(path, json=body)
    assert answer.status_code in (200, 201, 202), answer.text
    result: dict[str, Any] = answer.json()
    return result


async def nothing_more(ws: ClientConnection) -> list[dict[str, Any]]:
    """The frames that arrive before the answer to a ping (none expected)."""
    await ws.send(json.dumps({"type": "ping"}))
    return (await until(ws, lambda f: f["type"] == "pong"))[:-1]


@pytest.mark.postgres
async def test_a_turn_on_b_streams_to_a_client_on_a_in_order_and_once(
    make_cron: CronFactory,
) -> None:
    a = await replica(make_cron, model=OfflineModel(0))
    b = await replica(make_cron, model=OfflineModel(0))
    async with serving(a, b):
        await post(b, "/api/sessions", {"key": KEY})
        on_a, _ = await subscribe(a.ws_url)
        on_b, _ = await subscribe(b.ws_url)
        turn = await post(b, f"/api/sessions/{KEY}/messages", {"content": "hello from b"})
        seen_b = await until(on_b, lambda f: f["type"] == "session_sync")
        seen_a = await until(on_a, lambda f: f["type"] == "session_sync")
        kinds = [f["type"] for f in seen_a]
        assert kinds[0] == "stream_start"
        assert seen_a[0]["turn_id"] == turn["turn_id"]
        assert kinds[-2:] == ["stream_end", "session_sync"]
        assert set(kinds[1:-2]) == {"text_delta"}
        assert seen_a == seen_b  # the same frames, in the same order
        text = "".join(f["text"] for f in seen_a if f["type"] == "text_delta")
        reply = seen_a[-2]["message_id"]
        stored = {m.id: m.content for m in await b.cron.sessions.messages(KEY)}
        assert text == stored[reply]
        assert await nothing_more(on_a) == []  # once each: nothing came twice
        assert await nothing_more(on_b) == []
        # The turn was B's: B's channel delivered it; A's bus (so A's channels) saw nothing.
        await b.manager.idle()
        await a.manager.idle()
        assert [(m.kind, m.turn_id) for m in b.channel.got] == [("turn", turn["turn_id"])]
        assert a.channel.got == []
        assert [e for e in a.seen if e.session_key == KEY] == []
        assert b.relay.received == 0  # A relayed nothing back, B heard not its own
        # What a replica relayed in is a metric (agentcron_events_relayed_in_total).
        relayed_in = a.app.state.metrics.render().decode()
        assert f"agentcron_events_relayed_in_total {float(a.relay.received)}" in relayed_in
        assert a.relay.received >= len(seen_a)
        assert "agentcron_events_relayed_in_total 0.0" in b.app.state.metrics.render().decode()
        await on_a.close()
        await on_b.close()


@pytest.mark.postgres
async def test_a_system_event_on_b_reaches_a_client_on_a(make_cron: CronFactory) -> None:
    a = await replica(make_cron, model=OfflineModel(0))
    b = await replica(make_cron, model=OfflineModel(0))
    async with serving(a, b):
        on_a = await login(a.ws_url)  # subscribed to no session
        fired = SystemEventFired(session_key="", job_id="j1", run_id="r1", name="heartbeat",
                                 text="heartbeat check")  # fmt: skip
        await b.cron.events.publish(fired)
        (*_, frame) = await until(on_a, lambda f: f["type"] == "system_event")
        assert frame == {"type": "system_event", "session_key": "", "job_id": "j1",
                         "run_id": "r1", "name": "heartbeat", "text": "heartbeat check",
                         "source": "cron"}  # fmt: skip
        assert await nothing_more(on_a) == []
        await on_a.close()


@pytest.mark.postgres
async def test_a_client_that_subscribes_on_a_mid_turn_of_b_gets_the_turn_so_far(
    make_cron: CronFactory,
) -> None:
    gate = asyncio.Event()
    paused = asyncio.Event()

    async def sleep(delay: float) -> None:
        paused.set()
        await gate.wait()

    a = await replica(make_cron, model=OfflineModel(0))
    b = await replica(make_cron, model=OfflineModel(10, sleep=sleep))
    async with serving(a, b):
        await post(b, "/api/sessions", {"key": KEY})
        turn = await post(b, f"/api/sessions/{KEY}/messages", {"content": "tell me a story"})
        await paused.wait()  # the first word is out; the rest waits
        await wait_for(lambda: len(a.relay.turn_in_progress(KEY)[1]) == 2)
        late, subscribed = await subscribe(a.ws_url)
        assert subscribed["running_turn"] == turn["turn_id"]
        replay = subscribed["replay"]
        assert [e["type"] for e in replay] == ["stream_start", "text_delta"]
        gate.set()
        rest = await until(late, lambda f: f["type"] == "session_sync")
        assert [f["type"] for f in rest][-2:] == ["stream_end", "session_sync"]
        text = "".join(e["text"] for e in replay + rest if e["type"] == "text_delta")
        stored = {m.id: m.content for m in await b.cron.sessions.messages(KEY)}
        assert text == stored[rest[-2]["message_id"]]
        assert a.relay.turn_in_progress(KEY) == (None, [])  # dropped at its stream_end
        _, again = await subscribe(a.ws_url)
        assert (again["running_turn"], again["replay"]) == (None, [])
        await late.close()


@pytest.mark.postgres
async def test_a_decision_made_on_a_for_a_call_waiting_on_b_is_shown_once(
    make_cron: CronFactory,
) -> None:
    def deploy(env: str) -> str:
        """Deploy the app."""
        return f"deployed {env}"

    tools = [UserTool(deploy, requires_approval=True)]
    a = await replica(make_cron, model=OfflineModel(0), tools=tools)
    b = await replica(make_cron, model=OfflineModel(0), tools=tools)
    async with serving(a, b):
        await post(b, "/api/sessions", {"key": KEY})
        on_a, _ = await subscribe(a.ws_url)
        on_b, _ = await subscribe(b.ws_url)
        await post(b, f"/api/sessions/{KEY}/messages", {"content": "use deploy with env=prod"})
        requested = (await until(on_a, lambda f: f["type"] == "approval_requested"))[-1]
        # Decided on A: A announces it, and B, whose call waits, announces it too.
        await post(
            a, f"/api/approvals/{requested['approval_id']}", {"decision": "deny", "by": "ana"}
        )
        for ws in (on_a, on_b):
            frames = await until(ws, lambda f: f["type"] == "session_sync")
            decided = [f for f in frames if f["type"] == "approval_decided"]
            assert [(d["approval_id"], d["state"]) for d in decided] == [
                (requested["approval_id"], "denied")
            ]
            assert await nothing_more(ws) == []
        await on_a.close()
        await on_b.close()


@pytest.mark.postgres
async def test_events_too_big_for_one_payload(cron_url: str) -> None:
    """A delta is split into pieces that join to it; a job update loses its job; anything
    else too big comes as a session_sync; and small events share a payload.
    """
    here, there = SqlStore(cron_url), SqlStore(cron_url)
    got: list[tuple[dict[str, Any], bool]] = []
    sizes: list[int] = []
    for store in (here, there):
        await store.open()
    sender = EventRelay(here.signals, lambda e, everyone: None)
    receiver = EventRelay(there.signals, lambda e, everyone: got.append((e, everyone)))
    there.signals.subscribe_raw(
        Topic.EVENTS, lambda _o, payload: sizes.append(len(payload.encode()))
    )
    for store in (here, there):
        await store.signals.start()
    try:
        text = 'añ"\n€𝄞' * 3_000  # escapes and multi-byte characters: 6 bytes a character
        sender.send({"type": "text_delta", "session_key": KEY, "text": text}, False)
        job = {"id": "j1", "message": "m" * 9_000}
        update = {"type": "automation_update", "session_key": KEY, "action": "updated",
                  "job_id": "j1", "job": job}  # fmt: skip
        sender.send(update, True)
        sender.send({"type": "tool_call", "session_key": KEY, "result": "r" * 9_000}, False)
        for i in range(50):
            sender.send({"type": "thinking_delta", "session_key": KEY, "text": f"t{i}"}, False)
        sender.send({"type": "stream_end", "session_key": KEY, "turn_id": "t"}, False)
        await wait_for(lambda: got and got[-1][0]["type"] == "stream_end")
        deltas = [e for e, _ in got if e["type"] == "text_delta"]
        assert len(deltas) > 1
        assert "".join(e["text"] for e in deltas) == text
        (trimmed,) = [(e, g) for e, g in got if e["type"] == "automation_update"]
        assert trimmed == ({k: v for k, v in update.items() if k != "job"}, True)
        (sync,) = [(e, g) for e, g in got if e["type"] == "session_sync"]
        assert sync == ({"type": "session_sync", "session_key": KEY}, True)
        thinking = [e["text"] for e, g in got if e["type"] == "thinking_delta" and not g]
        assert thinking == [f"t{i}" for i in range(50)]
        await wait_for(lambda: sender.sent == len(sizes))  # its count follows the send's answer
        assert len(sizes) < len(got)  # batched: fewer payloads than events
        assert sender.dropped == 0
        assert max(sizes) <= LIMIT
        assert max(sizes) > LIMIT - 1_000  # the big ones filled their payloads
    finally:
        await sender.close()
        await receiver.close()
        for store in (here, there):
            await store.signals.stop()
            await store.close()


@pytest.mark.postgres
async def test_a_backlog_the_database_cannot_take_ends_in_a_session_sync(cron_url: str) -> None:
    """A burst bigger than the backlog bound, queued before the sender can run: the events
    past the bound are not relayed, and their session gets a session_sync after the rest.
    """
    here, there = SqlStore(cron_url), SqlStore(cron_url)
    got: list[dict[str, Any]] = []
    for store in (here, there):
        await store.open()
    sender = EventRelay(here.signals, lambda e, everyone: None)
    receiver = EventRelay(there.signals, lambda e, everyone: got.append(e))
    for store in (here, there):
        await store.signals.start()
    try:
        burst = MAX_WAITING_BYTES // 5_000 + 40  # each line is a little over 5,000 bytes
        for i in range(burst):  # no await: the sender has not run yet
            sender.send(
                {"type": "text_delta", "session_key": KEY, "text": f"{i:05}" + "x" * 5_000}, False
            )
        assert 0 < sender.lost < burst
        await wait_for(lambda: got and got[-1]["type"] == "session_sync", 10)
        texts = [e["text"][:5] for e in got if e["type"] == "text_delta"]
        assert texts == [f"{i:05}" for i in range(burst - sender.lost)]  # the first ones, in order
        assert got[-1] == {"type": "session_sync", "session_key": KEY}
    finally:
        await sender.close()
        await receiver.close()
        for store in (here, there):
            await store.signals.stop()
            await store.close()


@pytest.mark.parametrize("cron_backend", ["sqlite", "postgresql"], indirect=True)
def test_serve_relays_on_postgresql_only(tmp_path: Path, cron_url: str, cron_backend: str) -> None:
    hub = build(ServeOptions(home=tmp_path, url=cron_url)).app.state.hub
    assert (hub.relay is not None) == (cron_backend == "postgresql")


@pytest.mark.parametrize("cron_backend", ["sqlite"], indirect=True)
async def test_on_sqlite_the_relay_is_off_and_the_stream_works(make_cron: CronFactory) -> None:
    cron = await make_cron(start=False, runner=None, model=OfflineModel(0))
    app = create_app(cron, token=TOKEN, relay_events=True)
    assert app.state.hub.relay is None
    await cron.start()
    r = Replica(cron, app, chat_channel(), ChannelManager(cron, []), [])
    async with serving(r):
        await cron.sessions.create("websocket:x")
        ws, _ = await subscribe(r.ws_url, "websocket:x")
        await ws.send(json.dumps({"type": "message", "session_key": "websocket:x",
                                  "content": "hi"}))  # fmt: skip
        frames = await until(ws, lambda f: f["type"] == "session_sync")
        assert [f["type"] for f in frames][:2] == ["accepted", "stream_start"]
        assert [f["type"] for f in frames][-2:] == ["stream_end", "session_sync"]
        await ws.close()
