"""Unified mode's memory (seed 001): web chats and `unified:default` are one memory.

In unified mode a web chat's turn (`websocket:*`) and a turn of `unified:default` (the shared
automations' session) get the entries of all of them as one timeline; threads stay what is
shown and deleted. A shared automation's fire runs in the thread the person last talked in,
and never at the same time as a thread's turn. Without unified mode each session is its own
memory.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta

import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import UNIFIED_MEMORY, AgentCron
from agentcron.config import UNIFIED_SESSION_KEY
from agentcron.domain.sessions import MemoryScope
from agentcron.store import SqlStore
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory
from tests.helpers.ws import wait_for

SEC = timedelta(seconds=1)


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


class Echo:
    """A runner that records each turn's input and answers with a fixed text."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, TurnInput]] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.turns.append((session.key, turn))
        return Outcome.succeeded(f"ok: {turn.prompt}")

    def history(self, index: int) -> list[str]:
        return [h.content for h in self.turns[index][1].history]


# -- the store's read -------------------------------------------------------------------------


async def test_history_across_reads_one_timeline_of_the_scope(store: SqlStore) -> None:
    s = store.sessions
    for key in ("websocket:a", "websocket:b", UNIFIED_SESSION_KEY, "api:x", "websocketz:q"):
        await s.ensure_session(key, T0)
    at = T0
    written = {}
    for key, text in [
        ("websocket:a", "a1"),
        (UNIFIED_SESSION_KEY, "u1"),
        ("websocket:b", "b1"),
        ("api:x", "x1"),  # another session: not in the scope
        ("websocketz:q", "q1"),  # a look-alike prefix: not in the scope
        ("websocket:a", "a2"),
        ("websocket:b", "b2"),  # the trigger of the turn being read for
        ("websocket:a", "a3"),  # after the trigger: not its memory
    ]:
        at += SEC
        written[text] = await s.append_message(key, "user", text, at)
    trigger = written["b2"]

    found = await s.history_across(UNIFIED_MEMORY, "websocket:b", before=trigger.seq, limit=50)
    assert [m.content for m in found] == ["a1", "u1", "b1", "a2"]
    assert [m.session_key for m in found] == [
        "websocket:a", UNIFIED_SESSION_KEY, "websocket:b", "websocket:a",
    ]  # fmt: skip
    # bounded: the newest `limit` of the timeline
    found = await s.history_across(UNIFIED_MEMORY, "websocket:b", before=trigger.seq, limit=2)
    assert [m.content for m in found] == ["b1", "a2"]
    # the read of a turn of unified:default sees the threads too
    u2 = await s.append_message(UNIFIED_SESSION_KEY, "user", "u2", at + SEC)
    found = await s.history_across(UNIFIED_MEMORY, UNIFIED_SESSION_KEY, before=u2.seq, limit=50)
    assert [m.content for m in found] == ["a1", "u1", "b1", "a2", "b2", "a3"]
    # a scope of listed keys only
    only = MemoryScope(keys=("websocket:a", "api:x"))
    found = await s.history_across(only, "websocket:a", before=written["a3"].seq, limit=50)
    assert [m.content for m in found] == ["a1", "x1", "a2"]
    # each thread's transcript is still its own
    assert [m.content for m in await s.list_messages("websocket:b")] == ["b1", "b2"]


async def test_history_across_looks_at_most_limit_entries_of_each_session(
    store: SqlStore,
) -> None:
    s = store.sessions
    await s.ensure_session("websocket:long", T0)
    await s.ensure_session("websocket:short", T0)
    early = await s.append_message("websocket:short", "user", "early", T0)
    for i in range(30):
        await s.append_message("websocket:long", "user", f"long {i}", T0 + (i + 1) * SEC)
    trigger = await s.append_message("websocket:short", "user", "now", T0 + 60 * SEC)
    found = await s.history_across(UNIFIED_MEMORY, "websocket:short", before=trigger.seq, limit=5)
    assert [m.content for m in found] == [f"long {i}" for i in range(25, 30)]
    found = await s.history_across(UNIFIED_MEMORY, "websocket:short", before=trigger.seq, limit=40)
    assert found[0].content == early.content
    assert len(found) == 31
    with pytest.raises(ValueError, match="keys or key prefixes"):
        MemoryScope()


def test_a_scopes_sessions_share_the_lane_of_its_first_key() -> None:
    assert UNIFIED_MEMORY.lane_of("websocket:a") == UNIFIED_SESSION_KEY
    assert UNIFIED_MEMORY.lane_of(UNIFIED_SESSION_KEY) == UNIFIED_SESSION_KEY
    assert MemoryScope(prefixes=("web:",)).lane_of("web:x") == "web:x"  # no key: its own


async def test_last_talked_is_the_scopes_session_of_the_newest_user_turn(store: SqlStore) -> None:
    s = store.sessions
    assert await s.last_talked(UNIFIED_MEMORY) is None
    for at, key, source in [
        (1, "websocket:a", "user"),
        (2, "websocket:b", "user"),
        (3, "websocket:a", "automation"),  # not a person's
        (4, "telegram:42", "user"),  # not in the scope
        (5, "websocketz:q", "user"),  # a look-alike prefix: not in the scope
    ]:
        await s.open_turn(key, source, "hi", T0 + at * SEC, owner="me")
    assert await s.last_talked(UNIFIED_MEMORY) == "websocket:b"
    await s.open_turn(UNIFIED_SESSION_KEY, "user", "hi", T0 + 6 * SEC, owner="me")
    assert await s.last_talked(UNIFIED_MEMORY) == UNIFIED_SESSION_KEY
    assert await s.last_talked(MemoryScope(keys=("telegram:42",))) == "telegram:42"


# -- turns in unified mode --------------------------------------------------------------------


async def talk(cron: AgentCron, clock: FakeClock, key: str, text: str) -> None:
    clock.advance(SEC)
    turn = await cron.sessions.send(key, text)
    ended = await cron.sessions.wait_turn(turn.id, 10)
    assert ended.state.value == "succeeded", ended


async def test_web_chats_share_the_unified_memory(make_cron: CronFactory, clock: FakeClock) -> None:
    runner = Echo()
    cron = await make_cron(runner=runner, unified_session=True)
    await cron.sessions.create("websocket:a")
    await cron.sessions.create("websocket:b")
    await talk(cron, clock, "websocket:a", "the code word is walrus")
    await talk(cron, clock, "websocket:b", "what did I just say")
    assert runner.turns[1][0] == "websocket:b"  # the turn is still the thread's own
    assert runner.history(1) == ["the code word is walrus", "ok: the code word is walrus"]
    # an automation made from a web chat binds to unified:default; its fire sees the threads
    job = await cron.jobs.create(
        name="digest", when="in 1 minute", message="summarise", session_key=UNIFIED_SESSION_KEY
    )
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    key, fired = runner.turns[2]
    assert key == "websocket:b"  # its turn runs in the thread the person last talked in
    assert [h.content for h in fired.history] == [
        "the code word is walrus", "ok: the code word is walrus",
        "what did I just say", "ok: what did I just say",
    ]  # fmt: skip
    # ... and its reply is in the memory of every chat
    await talk(cron, clock, "websocket:a", "and now?")
    assert runner.history(3)[-1] == (await cron.sessions.messages("websocket:b"))[-1].content
    assert len(runner.history(3)) == 6
    # threads stay display scopes: each transcript holds only its own entries
    shown = [m.content for m in await cron.sessions.messages("websocket:b")]
    assert shown[:2] == ["what did I just say", "ok: what did I just say"]
    assert len(shown) == 4  # then the automation's trigger and reply
    assert shown[2] == "Scheduled automation triggered: digest\n\nsummarise"
    assert await cron.sessions.messages(UNIFIED_SESSION_KEY) == []
    # ... and deletion scopes: deleting a thread deletes its entries, never the automations
    deleted = await cron.sessions.delete("websocket:a")
    assert deleted.deleted is True
    assert (await cron.jobs.get(job.id)).id == job.id
    await talk(cron, clock, "websocket:b", "again")
    assert not [h for h in runner.history(4) if "walrus" in h]
    assert runner.history(4)[0] == "what did I just say"
    assert runner.history(4)[2].startswith("Scheduled automation triggered: digest")


async def test_without_unified_mode_each_chat_is_its_own_memory(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Echo()
    cron = await make_cron(runner=runner, unified_session=False)
    await talk(cron, clock, "websocket:a", "the code word is walrus")
    await talk(cron, clock, "websocket:b", "what did I just say")
    assert runner.history(1) == []
    await talk(cron, clock, "websocket:a", "and now?")
    assert runner.history(2) == ["the code word is walrus", "ok: the code word is walrus"]
    assert cron.lanes.memory_scope is None  # the path of today: one session, one read


async def test_only_web_chats_and_the_unified_session_share_memory(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Echo()
    cron = await make_cron(runner=runner, unified_session=True)
    await talk(cron, clock, "websocket:a", "the code word is walrus")
    await talk(cron, clock, "telegram:42", "what did I just say")
    await talk(cron, clock, "api:x", "what did I just say")
    assert runner.history(1) == []
    assert runner.history(2) == []
    assert cron.memory_scope("telegram:42") is None
    assert cron.memory_scope("websocket:z") == cron.memory_scope(UNIFIED_SESSION_KEY)


# -- one lane for the unified memory ----------------------------------------------------------


class Gated:
    """A runner whose turns wait for `release`; it records each turn's session and how many
    of its turns ran at once at most.
    """

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.keys: list[str] = []
        self.running = 0
        self.most = 0

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.keys.append(session.key)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return Outcome.succeeded(f"ok: {turn.prompt}")


async def test_a_shared_fire_waits_for_a_threads_turn_and_replies_in_that_thread(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Gated()
    cron = await make_cron(runner=runner, unified_session=True)
    for key in ("websocket:a", "websocket:b"):
        await cron.sessions.create(key)
    job = await cron.jobs.create(
        name="digest", when="in 1 minute", message="summarise", session_key=UNIFIED_SESSION_KEY
    )
    first = await cron.sessions.send("websocket:a", "a long question")
    await wait_for(lambda: runner.running == 1)
    second = await cron.sessions.send("websocket:b", "and another")  # the person talks in b
    clock.advance(timedelta(minutes=1))
    # the fire and b's turn wait in the one lane while a's turn runs
    await wait_for(lambda: cron.lanes.queued_turns == 2)
    assert runner.keys == ["websocket:a"]
    assert cron.sessions.running_turn("websocket:a") == first.id
    assert cron.sessions.running_turn("websocket:b") is None
    runner.release.set()
    await wait_settled(cron.engine)
    assert runner.most == 1
    assert runner.keys == ["websocket:a", "websocket:b", "websocket:b"]
    assert (await cron.sessions.wait_turn(second.id, 10)).state.value == "succeeded"
    shown = [m.content for m in await cron.sessions.messages("websocket:b")]
    assert shown[2] == "Scheduled automation triggered: digest\n\nsummarise"
    assert await cron.sessions.messages(UNIFIED_SESSION_KEY) == []
    (run,) = await cron.runs.list(job_id=job.id)
    assert run.state.value == "succeeded"
    turns = [*await cron.sessions.turns("websocket:a"), *await cron.sessions.turns("websocket:b")]
    spans = sorted((t.started_at, t.finished_at) for t in turns)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))  # type: ignore[operator]


@pytest.mark.parametrize("shared_chat", [True, False])
async def test_a_shared_fire_replies_in_the_shared_chat_when_asked_or_when_nobody_talked(
    make_cron: CronFactory, clock: FakeClock, shared_chat: bool
) -> None:
    runner = Echo()
    cron = await make_cron(runner=runner, unified_session=True, shared_chat=shared_chat)
    await cron.sessions.create("websocket:a")
    await cron.jobs.create(
        name="digest", when="every 1 minute", message="summarise", session_key=UNIFIED_SESSION_KEY
    )
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    assert runner.turns[0][0] == UNIFIED_SESSION_KEY  # nobody has talked yet: the shared chat
    await talk(cron, clock, "websocket:a", "hello")
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    assert runner.turns[2][0] == (UNIFIED_SESSION_KEY if shared_chat else "websocket:a")
    assert len(await cron.sessions.messages(UNIFIED_SESSION_KEY)) == (4 if shared_chat else 2)


async def test_the_unified_lease_serializes_threads_across_processes(
    make_cron: CronFactory,
) -> None:
    runner = Gated()
    one = await make_cron(runner=runner, unified_session=True)
    two = await make_cron(runner=runner, unified_session=True)
    for key in ("websocket:a", "websocket:b"):
        await one.sessions.create(key)
    first = await one.sessions.send("websocket:a", "a long question")
    await wait_for(lambda: runner.running == 1)
    second = await two.sessions.send("websocket:b", "meanwhile, elsewhere")
    # the other process's turn waits for the unified memory's lease, without running
    await wait_for(lambda: UNIFIED_SESSION_KEY in two.lanes._held_elsewhere)
    assert runner.keys == ["websocket:a"]
    runner.release.set()
    done = await one.sessions.wait_turn(first.id, 10)
    ended = await two.sessions.wait_turn(second.id, 10)
    assert ended.state.value == "succeeded", ended
    assert runner.most == 1
    assert done.finished_at is not None
    assert ended.started_at is not None
    assert done.finished_at <= ended.started_at
    assert (await two.sessions.get(UNIFIED_SESSION_KEY)).turn_owner is None  # let go


async def test_the_unified_lease_holds_across_processes_after_its_session_was_deleted(
    make_cron: CronFactory,
) -> None:
    runner = Gated()
    one = await make_cron(runner=runner, unified_session=True)
    two = await make_cron(runner=runner, unified_session=True)
    for key in ("websocket:a", "websocket:b"):
        await one.sessions.create(key)
    gone = await one.sessions.delete(UNIFIED_SESSION_KEY, confirm=True)
    assert gone.deleted
    first = await one.sessions.send("websocket:a", "a long question")
    await wait_for(lambda: runner.running == 1)
    second = await two.sessions.send("websocket:b", "meanwhile, elsewhere")
    # the first turn's start made the lane's session again: its lease holds the other process
    await wait_for(lambda: UNIFIED_SESSION_KEY in two.lanes._held_elsewhere)
    assert runner.keys == ["websocket:a"]
    runner.release.set()
    await one.sessions.wait_turn(first.id, 10)
    ended = await two.sessions.wait_turn(second.id, 10)
    assert ended.state.value == "succeeded", ended
    assert runner.most == 1
