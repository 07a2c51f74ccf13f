"""Owner liveness in the store, as a contract over SQLite and PostgreSQL: heartbeat rows, the
read of silent owners, leases renewed only for live work, own orphans settled, recovery
that two replicas can run at once without settling anything twice, and a turn it closes that
never overlaps the next turn of its session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
import pytest

from agentcron.domain.jobs import Job
from agentcron.domain.runs import Run
from agentcron.domain.sessions import Entry, Role, Turn
from agentcron.domain.states import RunState, TurnState
from agentcron.store import SqlStore, Transition
from agentcron.store.interface import EngineLedger
from agentcron.store.owners import LiveWork, owner_host_pid
from agentcron.store.turn_store import TurnRecovery
from agentcron.store.writes import JobFinish, JobOutcome, TurnStart, TurnStarted
from tests.conftest import T0
from tests.helpers.store_setup import (
    insert_jobs,
    list_owners,
    record_runs,
    renew_turn_lease,
    take_turn_lease,
)
from tests.integration.test_store_contract import armed, planner

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
ME = "host-a:101:01ME"
T = TypeVar("T")


@pytest.fixture
def ledger(store: SqlStore) -> EngineLedger:
    """The store as the engine sees it."""
    return store


def test_an_owner_string_names_its_host_and_pid() -> None:
    assert owner_host_pid("box-1.example:4242:01ULID") == ("box-1.example", 4242)
    assert owner_host_pid("odd") == ("odd", 0)
    assert owner_host_pid("h:notapid:x") == ("h", 0)


async def test_register_heartbeat_and_the_read_of_silent_owners(ledger: EngineLedger) -> None:
    await ledger.register_owner(ME, "engine", T0)
    await ledger.register_owner("host-b:202:01OTHER", "relay", T0)
    (a, b) = sorted(await list_owners(ledger), key=lambda o: o.owner)
    assert (a.host, a.pid, a.role, a.started_at, a.heartbeat_at) == (
        "host-a",
        101,
        "engine",
        T0,
        T0,
    )
    assert (b.host, b.pid, b.role) == ("host-b", 202, "relay")

    assert await ledger.heartbeat_owner(ME, T0 + 5 * SEC) is True
    # strictly older than `before`: B (T0) is silent at T0 + 1 s, A (T0 + 5 s) is not
    assert [o.owner for o in await ledger.dead_owners(T0 + SEC)] == ["host-b:202:01OTHER"]
    assert await ledger.dead_owners(T0) == []
    assert await ledger.dead_owners(T0 + 6 * SEC, exclude=ME) == [b]
    assert [o.owner for o in await ledger.dead_owners(T0 + 6 * SEC)] == [
        "host-b:202:01OTHER",  # oldest heartbeat first
        ME,
    ]

    # registering again renews the heartbeat (a restart reusing an owner string)
    await ledger.register_owner("host-b:202:01OTHER", "relay", T0 + 7 * SEC)
    assert [o.owner for o in await ledger.dead_owners(T0 + 6 * SEC)] == [ME]

    assert await ledger.unregister_owner("host-b:202:01OTHER") is True
    assert await ledger.unregister_owner("host-b:202:01OTHER") is False
    # a row that vanished is not recreated by a heartbeat: its owner learns it was dropped
    assert await ledger.heartbeat_owner("host-b:202:01OTHER", T0 + 8 * SEC) is False
    assert [o.owner for o in await list_owners(ledger)] == [ME]


async def test_renew_held_renews_only_the_live_work(store: SqlStore, ledger: EngineLedger) -> None:
    await insert_jobs(store, [armed("a"), armed("b")], T0)
    now = T0 + MIN
    fires = (
        await ledger.claim_due(now, owner=ME, lease_until=now + MIN, limit=10, planner=planner)
    ).fires
    live, orphan = sorted(f.run_id for f in fires)
    sessions = store.sessions
    for key in ("web:live", "web:orphan"):
        await sessions.ensure_session(key, now)
        turn = await sessions.open_turn(key, "user", "hi", now, owner=ME)
        assert await take_turn_lease(store, key, ME, turn.id, now, now + 5 * MIN) is None

    work = LiveWork(runs=frozenset({live}), sessions=frozenset({"web:live"}))
    renewed = await ledger.renew_held(ME, work, now + 3 * MIN, now + 9 * MIN)
    assert renewed == 1
    assert (await store.get_run(live)).lease_expires_at == now + 3 * MIN
    assert (await store.get_run(orphan)).lease_expires_at == now + MIN
    assert (await sessions.get_session("web:live")).turn_lease_expires_at == now + 9 * MIN
    assert (await sessions.get_session("web:orphan")).turn_lease_expires_at == now + 5 * MIN
    # another owner's work is never renewed, whatever `live` says
    assert await ledger.renew_held("host-b:1:X", work, now + 4 * MIN, now + 9 * MIN) == 0
    assert (await store.get_run(live)).lease_expires_at == now + 3 * MIN


async def test_own_orphans_are_settled_and_live_work_is_left_alone(
    store: SqlStore, ledger: EngineLedger
) -> None:
    await insert_jobs(store, [armed(f"j{i}") for i in range(3)], T0)
    now = T0 + MIN
    fires = (
        await ledger.claim_due(now, owner=ME, lease_until=now + MIN, limit=10, planner=planner)
    ).fires
    live_run, started, unstarted = (f.run_id for f in fires)
    await record_runs(store, [Transition(started, RunState.RUNNING, now)])
    sessions = store.sessions
    for key in ("web:live", "web:cut", "web:waiting"):
        await sessions.ensure_session(key, now)
    cut = await sessions.open_turn(
        "web:cut", "user", "cut off", now, state=TurnState.RUNNING, owner=ME
    )
    assert await take_turn_lease(store, "web:cut", ME, cut.id, now, now + 5 * MIN) is None
    running = await sessions.open_turn(
        "web:live", "user", "running here", now, state=TurnState.RUNNING, owner=ME
    )
    assert await take_turn_lease(store, "web:live", ME, running.id, now, now + 5 * MIN) is None
    waiting = await sessions.open_turn("web:waiting", "user", "queued", now, owner=ME)
    work = LiveWork(
        runs=frozenset({live_run}), turns=frozenset({running.id}), sessions=frozenset({"web:live"})
    )

    first = await ledger.settle_orphans(ME, now, work)
    assert first.released == 1
    assert [r.id for r in first.interrupted] == [started]
    assert first.disowned == 1  # the running turn; the waiting one is only suspected
    assert first.freed == 1
    assert first.suspects == frozenset({waiting.id})
    runs = {r.id: r for r in await store.list_runs()}
    assert (runs[live_run].state, runs[live_run].owner) == (RunState.CLAIMED, ME)
    assert (runs[started].state, runs[started].owner) == (RunState.INTERRUPTED, None)
    assert (runs[unstarted].state, runs[unstarted].owner) == (RunState.CLAIMED, None)
    assert (await sessions.get_turn(cut.id)).owner is None  # for recover_turns to close
    assert (await sessions.get_turn(running.id)).owner == ME
    assert (await sessions.get_turn(waiting.id)).owner == ME
    assert (await sessions.get_session("web:cut")).turn_owner is None
    assert (await sessions.get_session("web:live")).turn_owner == ME

    second = await ledger.settle_orphans(ME, now, work, first.suspects)
    assert (second.released, second.interrupted, second.disowned, second.freed) == (0, [], 1, 0)
    assert (await sessions.get_turn(waiting.id)).owner is None
    # the settled ones are picked up by the usual paths: the cut turn closed, the fire adopted
    recovery = await sessions.recover_turns(now, "host-b:7:NEW", lambda owner: False)
    assert [t.id for t in recovery.interrupted] == [cut.id]
    assert [t.id for t in recovery.adopted] == [waiting.id]
    adopted = await ledger.adopt_released("host-b:7:NEW", now + MIN, now)
    assert [f.run_id for f in adopted] == [unstarted]


async def _two_stores(url: str) -> tuple[SqlStore, SqlStore]:
    a, b = SqlStore(url), SqlStore(url)
    await a.open()
    await b.open()
    return a, b


def inside_after_read(
    store: SqlStore, dead: str, other: Callable[[], Coroutine[Any, Any, T]], done: list[T]
) -> Callable[[str], bool]:
    """An `is_dead` for one replica that, the first time it is asked (inside that replica's
    transaction, after its read of what to settle), runs the other replica's whole recovery
    to its commit: the worst interleaving. PostgreSQL only: its read takes no lock. SQLite
    serializes writers (BEGIN IMMEDIATE), so there the other replica simply runs first.
    """
    loop = asyncio.get_running_loop()

    def is_dead(owner: str) -> bool:
        if not done and store.dialect == "postgresql":
            done.append(asyncio.run_coroutine_threadsafe(other(), loop).result(timeout=30))
        return owner == dead

    return is_dead


async def test_two_replicas_recovering_at_once_settle_each_turn_once(
    store: SqlStore, store_url: str
) -> None:
    """Two replicas find the same dead owner at once: each cut-off turn is closed (and so
    announced) by exactly one of them, each waiting turn adopted by exactly one, and the
    dead owner's session leases are freed.
    """
    dead = "host-z:999:01DEAD"
    now = T0
    sessions = store.sessions
    cut_ids, waiting_ids = [], []
    for i in range(6):
        key = f"web:{i}"
        await sessions.ensure_session(key, now)
        cut = await sessions.open_turn(
            key, "user", "half", now, state=TurnState.RUNNING, owner=dead
        )
        assert await take_turn_lease(store, key, dead, cut.id, now, now + 5 * MIN) is None
        cut_ids.append(cut.id)
        waiting_ids.append((await sessions.open_turn(key, "user", "next", now, owner=dead)).id)

    a, b = await _two_stores(store_url)
    try:
        inner: list[TurnRecovery] = []

        def b_recovers() -> Coroutine[Any, Any, TurnRecovery]:
            return b.sessions.recover_turns(now, "host-b:2:B", lambda owner: owner == dead)

        ra = await a.sessions.recover_turns(
            now, "host-a:1:A", inside_after_read(a, dead, b_recovers, inner)
        )
        rb = inner[0] if inner else await b_recovers()
    finally:
        await a.close()
        await b.close()
    if store.dialect == "postgresql":
        # the other replica committed first, inside A's transaction: A finds nothing left
        assert (ra.interrupted, ra.adopted) == ([], [])
    cut_by = [t.id for t in ra.interrupted] + [t.id for t in rb.interrupted]
    assert sorted(cut_by) == sorted(cut_ids)  # each once, between the two
    adopted_by = {t.id: "host-a:1:A" for t in ra.adopted} | {t.id: "host-b:2:B" for t in rb.adopted}
    assert sorted(adopted_by) == sorted(waiting_ids)
    assert len(ra.adopted) + len(rb.adopted) == len(waiting_ids)
    for i, (cut_id, waiting_id) in enumerate(zip(cut_ids, waiting_ids, strict=True)):
        assert (await sessions.get_turn(cut_id)).state is TurnState.INTERRUPTED
        assert (await sessions.get_turn(waiting_id)).owner == adopted_by[waiting_id]
        assert (await sessions.get_session(f"web:{i}")).turn_owner is None


async def test_a_lease_taken_after_the_read_is_not_freed(store: SqlStore) -> None:
    """The freeing of a gone owner's lease is a compare-and-set on the lease as read: one
    renewed (or taken by a live owner) since is kept.
    """
    sessions = store.sessions
    now = T0
    await sessions.ensure_session("web:1", now)
    turn = await sessions.open_turn("web:1", "user", "x", now, owner="host-q:1:Q")
    until: datetime = now + MIN
    assert await take_turn_lease(store, "web:1", "host-q:1:Q", turn.id, now, until) is None
    # expired at now + 2 min: free; but renewed just before the recovery writes, it stays
    assert await renew_turn_lease(store, "web:1", "host-q:1:Q", now + 10 * MIN)
    await sessions.recover_turns(now + 2 * MIN, "host-a:1:A", lambda owner: False)
    assert (await sessions.get_session("web:1")).turn_owner == "host-q:1:Q"
    await sessions.recover_turns(now + 11 * MIN, "host-a:1:A", lambda owner: False)
    assert (await sessions.get_session("web:1")).turn_owner is None


async def test_two_replicas_reaping_at_once_interrupt_each_run_once(
    store: SqlStore, store_url: str
) -> None:
    dead = "host-z:999:01DEAD"
    await insert_jobs(store, [armed(f"j{i}") for i in range(8)], T0)
    now = T0 + MIN
    fires = (
        await store.claim_due(now, owner=dead, lease_until=now + MIN, limit=10, planner=planner)
    ).fires
    started = [f.run_id for f in fires[:5]]
    await record_runs(store, [Transition(r, RunState.RUNNING, now) for r in started])
    a, b = await _two_stores(store_url)
    try:
        inner: list[list[Run]] = []

        def b_reaps() -> Coroutine[Any, Any, list[Run]]:
            return b.reap(now, "host-b:2:B", lambda owner: owner == dead)

        ra = await a.reap(now, "host-a:1:A", inside_after_read(a, dead, b_reaps, inner))
        rb = inner[0] if inner else await b_reaps()
    finally:
        await a.close()
        await b.close()
    if store.dialect == "postgresql":
        assert ra == []  # the other replica interrupted them all inside A's transaction
    assert sorted(r.id for r in [*ra, *rb]) == sorted(started)
    runs = {r.id: r for r in await store.list_runs()}
    assert {runs[r].state for r in started} == {RunState.INTERRUPTED}
    assert {(runs[f.run_id].state, runs[f.run_id].owner) for f in fires[5:]} == {
        (RunState.CLAIMED, None)
    }


# -- a recovered turn and the next one never overlap ----------------------------------------

DEAD = "host-z:999:01DEAD"
LEASE = 5 * MIN


def _no_outcome(job: Job, outcome: JobOutcome) -> JobFinish:  # pragma: no cover - user turns
    raise AssertionError("no job outcome in these tests")


def _start(key: str, turn_id: str, owner: str, at: datetime) -> TurnStart:
    return TurnStart(key, turn_id, owner, at, at + LEASE, Entry(Role.USER, "go", {}))


async def _begin(store: SqlStore, key: str, owner: str, at: datetime) -> Turn:
    """A turn of `owner` in session `key`, begun (lease, opening entry, running) at `at`."""
    turn = await store.sessions.open_turn(key, "user", "go", T0, owner=owner)
    (began,) = await store.apply([_start(key, turn.id, owner, at)], _no_outcome)
    assert isinstance(began, TurnStarted)
    assert began.message is not None
    return await store.sessions.get_turn(turn.id)


async def _start_later(store: SqlStore, start: TurnStart) -> Turn:
    (began,) = await store.apply([start], _no_outcome)
    assert isinstance(began, TurnStarted)
    assert began.message is not None, f"the session was not free: {began}"
    assert began.message.created_at >= start.at
    return await store.sessions.get_turn(start.turn_id)


def _apart(first: Turn, then: Turn) -> None:
    """`first` ended, truthfully (not before it began), and `then` began no earlier."""
    assert first.started_at is not None
    assert first.finished_at is not None
    assert then.started_at is not None
    assert first.finished_at >= first.started_at, (
        f"{first.id} ended at {first.finished_at.time()}, before it began at "
        f"{first.started_at.time()}"
    )
    assert then.started_at >= first.finished_at, (
        f"{then.id} began at {then.started_at.time()}, before {first.id} ended at "
        f"{first.finished_at.time()}: overlap "
        f"{(first.finished_at - then.started_at).total_seconds():.3f}s"
    )


async def test_a_start_made_before_a_dead_owners_turn_was_closed_begins_after_it(
    store: SqlStore,
) -> None:
    """The kill -9 race (test_replicas, seed 20261128, session api:r97, overlap 0.213 s): a
    replica dies after its turn's start was durable, before its runner was called. A
    survivor's start for the same session is made at 2.000 s and waits in its group commit
    while another survivor's recovery, at 2.213 s, closes the dead turn (finished then) and
    frees the lease. The start then takes the free lease: it must be stored as beginning no
    earlier than 2.213 s, not at the 2.000 s it was made at.
    """
    key = "api:r97"
    cut = await _begin(store, key, DEAD, T0 + SEC)
    after = await store.sessions.open_turn(key, "user", "next", T0, owner="host-b:2:B")
    made = _start(key, after.id, "host-b:2:B", T0 + 2 * SEC)
    closed_at = T0 + timedelta(seconds=2.213)
    found = await store.sessions.recover_turns(closed_at, "host-c:3:C", lambda o: o == DEAD)
    assert [t.id for t in found.interrupted] == [cut.id]
    nxt = await _start_later(store, made)
    cut = await store.sessions.get_turn(cut.id)
    assert (cut.state, cut.finished_at) == (TurnState.INTERRUPTED, closed_at)
    _apart(cut, nxt)


async def test_a_turn_claimed_ahead_and_cut_before_its_time_never_ends_before_it_began(
    store: SqlStore,
) -> None:
    """A fire claimed ahead has its start written before its time and stamped at it (1.050 s);
    its process dies while it sleeps until then, and a survivor recovers it at 1.010 s and
    posts the interrupted notice at that time (as `Lanes.recover` does). The turn ends no
    earlier than it began, and a start made at 1.020 s that takes the freed lease begins
    after it ended (the notice's earlier time does not move the session back).
    """
    key = "api:ahead"
    fire_at = T0 + timedelta(seconds=1.05)
    cut = await _begin(store, key, DEAD, fire_at)
    after = await store.sessions.open_turn(key, "user", "next", T0, owner="host-b:2:B")
    recovered_at = T0 + timedelta(seconds=1.01)
    found = await store.sessions.recover_turns(recovered_at, "host-c:3:C", lambda o: o == DEAD)
    assert [t.id for t in found.interrupted] == [cut.id]
    await store.sessions.append_message(key, Role.ASSISTANT, "interrupted", recovered_at)
    nxt = await _start_later(
        store, _start(key, after.id, "host-b:2:B", T0 + timedelta(seconds=1.02))
    )
    cut = await store.sessions.get_turn(cut.id)
    assert cut.state is TurnState.INTERRUPTED
    _apart(cut, nxt)


async def test_a_turn_whose_lease_was_let_go_ends_before_the_next_turn_began(
    store: SqlStore,
) -> None:
    """An orphan turn (running, no task holds it) has its lease let go by `settle_orphans` at
    10 s and is handed to recovery; another process's turn takes the free session at 11 s;
    recovery closes the orphan at 12 s. The orphan had stopped before the session was let
    go: it is stored as ended no later than the next turn's start, not at 12 s.
    """
    key = "api:orphan"
    orphan = await _begin(store, key, ME, T0 + SEC)
    settled = await store.settle_orphans(ME, T0 + 10 * SEC, LiveWork())
    assert (settled.disowned, settled.freed) == (1, 1)
    after = await store.sessions.open_turn(key, "user", "next", T0, owner="host-b:2:B")
    nxt = await _start_later(store, _start(key, after.id, "host-b:2:B", T0 + 11 * SEC))
    found = await store.sessions.recover_turns(T0 + 12 * SEC, "host-c:3:C", lambda o: False)
    assert [t.id for t in found.interrupted] == [orphan.id]
    orphan = await store.sessions.get_turn(orphan.id)
    assert orphan.state is TurnState.INTERRUPTED
    _apart(orphan, nxt)
    # The next turn still holds its session and ends as usual.
    assert (await store.sessions.get_session(key)).turn_id == nxt.id


async def _blocked(dsn: str, n: int, unless: asyncio.Task[Any] | None = None) -> None:
    """Wait until `n` backends of this database wait for a row lock, or `unless` ended
    without waiting for one (deadline 10 s).
    """
    deadline = asyncio.get_running_loop().time() + 10.0
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        while unless is None or not unless.done():
            cur = await admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            row = await cur.fetchone()
            if row is not None and row[0] >= n:
                return
            assert asyncio.get_running_loop().time() < deadline, f"{n} never waited for a lock"
            await asyncio.sleep(0.01)


async def test_a_start_committing_during_the_recovery_is_seen_by_it(
    store: SqlStore, store_url: str
) -> None:
    """PostgreSQL (SQLite runs one writer at a time): the next turn's group commit holds the
    session's row while the recovery closes the orphan whose lease was let go. The recovery
    waits for that commit before it reads the session's later starts, so the orphan ends
    no later than the next turn began (11 s), not at the recovery's 12 s.
    """
    if store.dialect != "postgresql":
        pytest.skip("SQLite serializes writers: no start commits inside a recovery")
    key = "api:during"
    orphan = await _begin(store, key, ME, T0 + SEC)
    await store.settle_orphans(ME, T0 + 10 * SEC, LiveWork())
    after = await store.sessions.open_turn(key, "user", "next", T0, owner="host-b:2:B")
    b, c = await _two_stores(store_url)
    dsn = store_url.replace("postgresql+psycopg://", "postgresql://")
    try:
        async with await psycopg.AsyncConnection.connect(dsn) as blocker:
            await blocker.execute("SELECT 1 FROM sessions WHERE session_key = %s FOR UPDATE", [key])
            starting = asyncio.create_task(
                b.apply([_start(key, after.id, "host-b:2:B", T0 + 11 * SEC)], _no_outcome)
            )
            await _blocked(dsn, 1)  # the start's group commit waits for the row first
            recovering = asyncio.create_task(
                c.sessions.recover_turns(T0 + 12 * SEC, "host-c:3:C", lambda o: False)
            )
            await _blocked(dsn, 2, unless=recovering)
            await blocker.commit()
            (began,), found = await asyncio.gather(starting, recovering)
    finally:
        await b.close()
        await c.close()
    assert isinstance(began, TurnStarted)
    assert began.message is not None
    assert [t.id for t in found.interrupted] == [orphan.id]
    _apart(await store.sessions.get_turn(orphan.id), await store.sessions.get_turn(after.id))
