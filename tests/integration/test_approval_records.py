"""Approval records contract (`ApprovalRecords`, store/interface.py) over SQLite and PostgreSQL:
insert, compare-and-set decisions, reads, listing, start-up and periodic reaping, a session's
approvals expiring with it, pruning; and the broker (service/approvals.py) writing every change
through them, its timeout on the clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from ulid import ULID

from agentcron.domain.approvals import (
    Approval,
    ApprovalError,
    ApprovalNotFoundError,
    ApprovalState,
    decide,
    expire,
    new_approval,
)
from agentcron.domain.states import RunState, TurnState
from agentcron.service.approvals import ApprovalBroker
from agentcron.store import SqlStore
from agentcron.store.ids import new_id
from agentcron.store.interface import ApprovalRecords
from agentcron.store.writes import Transition
from agentcron.testing import FakeClock
from tests.conftest import T0
from tests.helpers.store_setup import insert_jobs, record_runs
from tests.helpers.ws import wait_for
from tests.integration.test_store_contract import armed, claim

MIN = timedelta(minutes=1)


def records(store: SqlStore) -> ApprovalRecords:
    """The store as the broker sees it."""
    return store.approvals


def pending(n: int, key: str | None = "web:1", turn: str | None = None) -> Approval:
    return new_approval(
        tool=f"tool{n}",
        args={"n": n, "nested": {"path": "/tmp/x"}},
        session_key=key,
        turn_id=turn,
        now=T0 + n * timedelta(seconds=1),
        timeout=5 * MIN,
        approval_id=new_id(),
    )


async def test_an_inserted_approval_is_what_a_read_returns(store: SqlStore) -> None:
    rec = records(store)
    a = await rec.insert(pending(1, turn="T1"))
    assert await rec.get(a.id) == a
    assert await rec.get("nope") is None
    got = await rec.get(a.id)
    assert got is not None
    assert got.pending
    assert got.args == {"n": 1, "nested": {"path": "/tmp/x"}}
    assert got.expires_at == T0 + timedelta(seconds=1) + 5 * MIN


async def test_a_decision_lands_only_on_a_pending_record(store: SqlStore) -> None:
    rec = records(store)
    a = await rec.insert(pending(1))
    approved = decide(a, "approve", by="ana", at=T0 + MIN)
    stored = await rec.update_if_pending(approved)
    assert stored == approved
    assert await rec.get(a.id) == approved
    # a second decision (another replica, a late timeout) finds it decided: nothing changes
    assert await rec.update_if_pending(decide(a, "deny", by="bob", at=T0 + MIN)) is None
    assert await rec.update_if_pending(expire(a, at=T0 + 9 * MIN)) is None
    after = await rec.get(a.id)
    assert after is not None
    assert (after.state, after.decided_by) == (ApprovalState.APPROVED, "ana")
    assert await rec.update_if_pending(dataclasses.replace(approved, id="missing")) is None


async def test_of_deciders_in_two_processes_exactly_one_wins(
    store: SqlStore, store_url: str
) -> None:
    other = SqlStore(store_url)  # another process's store: its own connections and writer
    await other.open()
    try:
        a = await records(store).insert(pending(1))
        outcomes = await asyncio.gather(
            *(
                records(store if i % 2 else other).update_if_pending(
                    decide(a, "approve" if i % 2 else "deny", by=f"p{i}", at=T0)
                )
                for i in range(8)
            )
        )
    finally:
        await other.close()
    won = [o for o in outcomes if o is not None]
    assert len(won) == 1
    assert await records(store).get(a.id) == won[0]


async def test_listing_pending_of_a_session_or_all_oldest_first(store: SqlStore) -> None:
    rec = records(store)
    a3 = await rec.insert(pending(3))
    a1 = await rec.insert(pending(1))
    b2 = await rec.insert(pending(2, key="web:2"))
    a4 = await rec.insert(pending(4))
    await rec.update_if_pending(decide(a4, "deny", by="ana", at=T0 + MIN))
    assert [a.id for a in await rec.list("web:1")] == [a1.id, a3.id]
    assert [a.id for a in await rec.list()] == [a1.id, b2.id, a3.id]
    assert [a.id for a in await rec.list("web:1", pending_only=False)] == [a1.id, a3.id, a4.id]
    assert [a.id for a in await rec.list(pending_only=False, limit=2)] == [a3.id, a4.id]
    assert await rec.list("web:9") == []


async def test_reaping_expires_what_no_running_turn_waits_for(store: SqlStore) -> None:
    rec = records(store)
    await store.sessions.ensure_session("web:1", T0)
    live = await store.sessions.open_turn(
        "web:1", "user", "hi", T0, owner="alive:1:A", state=TurnState.RUNNING
    )
    ended = await store.sessions.open_turn(
        "web:1", "user", "hi", T0, owner="gone:1:B", state=TurnState.INTERRUPTED
    )
    waiting = await rec.insert(pending(1, turn=live.id))
    cut = await rec.insert(pending(2, turn=ended.id))
    no_turn = await rec.insert(pending(3))
    gone_turn = await rec.insert(pending(4, turn="deleted-turn"))
    done = await rec.insert(pending(5, turn=ended.id))
    approved = await rec.update_if_pending(decide(done, "approve", by="ana", at=T0))

    reaped = await rec.expire_orphaned(T0 + MIN, "restart")

    assert [a.id for a in reaped] == [cut.id, no_turn.id, gone_turn.id]
    for a in reaped:
        assert (a.state, a.decision, a.decided_by, a.decided_at) == (
            ApprovalState.EXPIRED,
            "deny",
            "restart",
            T0 + MIN,
        )
        assert await rec.get(a.id) == a
    assert await rec.get(waiting.id) == waiting  # its turn runs in a live process
    assert await rec.get(done.id) == approved  # decided ones are never touched
    assert [a.id for a in await rec.list()] == [waiting.id]
    assert await rec.expire_orphaned(T0 + 2 * MIN, "restart") == []


async def test_the_periodic_reap_spares_turnless_approvals_and_running_isolated_runs(
    store: SqlStore,
) -> None:
    rec = records(store)
    await store.sessions.ensure_session("web:1", T0)
    live = await store.sessions.open_turn(
        "web:1", "user", "hi", T0, owner="alive:1:A", state=TurnState.RUNNING
    )
    ended = await store.sessions.open_turn(
        "web:1", "user", "hi", T0, owner="gone:1:B", state=TurnState.INTERRUPTED
    )
    # an isolated run (a delivery job's built-in agent) names its run as the approval's turn
    await insert_jobs(store, [armed("delivery")], T0)
    (fire,) = await claim(store, T0 + MIN)
    await record_runs(store, [Transition(fire.run_id, RunState.RUNNING, T0 + MIN)])
    waiting = await rec.insert(pending(1, turn=live.id))
    cut = await rec.insert(pending(2, turn=ended.id))
    no_turn = await rec.insert(pending(3))
    in_run = await rec.insert(pending(4, turn=fire.run_id))

    reaped = await rec.expire_orphaned(T0 + 2 * MIN, "restart", turnless=False)

    assert [a.id for a in reaped] == [cut.id]
    assert [a.id for a in await rec.list()] == [waiting.id, no_turn.id, in_run.id]
    # once the run has ended, nothing waits for its approval any more
    await record_runs(store, [Transition(fire.run_id, RunState.SUCCEEDED, T0 + 3 * MIN)])
    reaped = await rec.expire_orphaned(T0 + 4 * MIN, "restart", turnless=False)
    assert [(a.id, a.decided_by, a.decided_at) for a in reaped] == [
        (in_run.id, "restart", T0 + 4 * MIN)
    ]
    # a start also reaps what names no turn
    assert [a.id for a in await rec.expire_orphaned(T0 + 5 * MIN, "restart")] == [no_turn.id]
    assert [a.id for a in await rec.list()] == [waiting.id]


async def test_a_sessions_pending_approvals_expire_with_it(store: SqlStore) -> None:
    rec = records(store)
    a1 = await rec.insert(pending(1))
    a2 = await rec.insert(pending(2))
    done = await rec.insert(pending(3))
    denied = await rec.update_if_pending(decide(done, "deny", by="ana", at=T0 + MIN))
    other = await rec.insert(pending(4, key="web:2"))

    ended = await rec.expire_session("web:1", T0 + 2 * MIN, "session deleted")

    assert [a.id for a in ended] == [a1.id, a2.id]
    for a in ended:
        assert (a.state, a.decision, a.decided_by, a.decided_at) == (
            ApprovalState.EXPIRED,
            "deny",
            "session deleted",
            T0 + 2 * MIN,
        )
        assert await rec.get(a.id) == a  # kept, decided
    assert await rec.get(done.id) == denied  # a decided one is never touched
    assert await rec.list("web:1") == []
    assert [a.id for a in await rec.list()] == [other.id]
    assert await rec.expire_session("web:1", T0 + 3 * MIN, "session deleted") == []
    assert await rec.expire_session("web:9", T0 + 3 * MIN, "session deleted") == []


async def test_pruning_deletes_only_old_decided_records(store: SqlStore) -> None:
    rec = records(store)
    old = await rec.insert(pending(1))
    await rec.update_if_pending(decide(old, "deny", by="ana", at=T0))
    recent = await rec.insert(pending(2))
    await rec.update_if_pending(decide(recent, "deny", by="ana", at=T0 + 4 * MIN))
    still = await rec.insert(pending(3))
    assert await rec.prune(T0 + MIN) == 1
    assert await rec.get(old.id) is None
    assert [a.id for a in await rec.list(pending_only=False)] == [recent.id, still.id]


# -- the broker writes through the store ------------------------------------------------


def broker_of(
    store: SqlStore,
    seen: list[Approval] | None = None,
    clock: FakeClock | None = None,
    **kw: Any,
) -> ApprovalBroker:
    log = seen if seen is not None else []
    return ApprovalBroker(store.approvals, clock or FakeClock(T0), on_change=log.append, **kw)


async def asked(broker: ApprovalBroker, key: str = "api:s") -> Approval:
    """The first approval stored for `key` (a TimeoutError when none is within 10 s)."""
    async with asyncio.timeout(10):
        while not (found := await broker.list(key)):  # noqa: ASYNC110 (no event marks it)
            await asyncio.sleep(0.005)
    return found[0]


async def test_a_request_is_stored_then_waits_for_the_decision(store: SqlStore) -> None:
    seen: list[Approval] = []
    broker = broker_of(store, seen)
    waiting = asyncio.create_task(
        broker.request(tool="rm", args={"p": 1}, session_key="api:s", turn_id="t1")
    )
    approval = await asked(broker)
    assert str(ULID.from_str(approval.id)) == approval.id  # a ULID, as every record's id
    # Told once stored: the request goes on after its insert commits, and a reader may see the
    # record before that, so wait for the telling.
    await wait_for(lambda: seen)
    assert await store.approvals.get(approval.id) == approval == seen[0]  # stored, then told
    assert await broker.list("api:other") == []
    decided = await broker.decide(approval.id, "approve", by="ana")
    done = await waiting
    assert done == decided == await store.approvals.get(approval.id)
    assert (done.state, done.decided_by) == (ApprovalState.APPROVED, "ana")
    assert [a.state for a in seen] == [ApprovalState.PENDING, ApprovalState.APPROVED]
    assert await broker.list("api:s") == []
    assert await broker.list("api:s", pending_only=False) == [done]
    with pytest.raises(ApprovalError, match="already approved"):
        await broker.decide(approval.id, "deny", by="bo")
    with pytest.raises(ApprovalNotFoundError, match="no approval"):
        await broker.get("nope")


async def test_a_timeout_on_the_clock_is_written_as_expired(store: SqlStore) -> None:
    seen: list[Approval] = []
    clock = FakeClock(T0)
    broker = broker_of(store, seen, clock, timeout=5 * MIN)
    waiting = asyncio.create_task(
        broker.request(tool="rm", args={}, session_key="api:s", turn_id=None, wait=2 * MIN)
    )
    approval = await asked(broker)
    assert approval.expires_at == T0 + 2 * MIN  # its own wait, not the default
    clock.advance(MIN + timedelta(seconds=59))  # not yet: real time does not end it either
    await asyncio.sleep(0.05)
    assert not waiting.done()
    clock.advance(timedelta(seconds=1))  # the clock reaches expires_at: the wait ends
    done = await asyncio.wait_for(waiting, 2)
    assert (done.state, done.decided_by, done.decided_at) == (
        ApprovalState.EXPIRED,
        "timeout",
        T0 + 2 * MIN,
    )
    assert await store.approvals.get(done.id) == done
    assert [a.state for a in seen] == [ApprovalState.PENDING, ApprovalState.EXPIRED]


async def test_a_cancelled_wait_is_written_as_expired(store: SqlStore) -> None:
    broker = broker_of(store)
    waiting = asyncio.create_task(
        broker.request(tool="rm", args={}, session_key="api:s", turn_id="t1")
    )
    approval = await asked(broker)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await broker.list("api:s") == []
    gone = await store.approvals.get(approval.id)
    assert gone is not None
    assert (gone.state, gone.decided_by) == (ApprovalState.EXPIRED, "cancelled")
    with pytest.raises(ApprovalError, match="already expired"):
        await broker.decide(approval.id, "approve", by="ana")


async def test_a_decision_made_by_another_process_reaches_the_waiting_call(
    store: SqlStore,
) -> None:
    here = broker_of(store, poll=0.02)
    elsewhere = broker_of(store)  # another process (or replica) on the same database
    waiting = asyncio.create_task(
        here.request(tool="rm", args={"p": 1}, session_key="api:s", turn_id="t1")
    )
    approval = await asked(elsewhere)
    await elsewhere.decide(approval.id, "deny", by="bo")
    done = await asyncio.wait_for(waiting, 2)
    assert (done.state, done.decided_by) == (ApprovalState.DENIED, "bo")
    # and the one that lost the race gets a 409's error, not a second decision
    with pytest.raises(ApprovalError, match="already denied"):
        await here.decide(approval.id, "approve", by="ana")


async def test_stored_arguments_are_bounded(store: SqlStore) -> None:
    broker = broker_of(store)
    waiting = asyncio.create_task(
        broker.request(tool="write", args={"text": "y" * 10_000}, session_key="api:s", turn_id=None)
    )
    approval = await asked(broker)
    stored = await store.approvals.get(approval.id)
    assert stored is not None
    assert list(stored.args) == ["_truncated"]
    assert len(stored.args["_truncated"]) <= 2_001
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


class HeldDecision:
    """The store's approvals, with a decision's write held after it committed (until
    `release`): the waiting call's re-read can see the decision and end first.
    """

    def __init__(self, records: ApprovalRecords) -> None:
        self._records = records
        self.landed = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._records, name)

    async def update_if_pending(self, approval: Approval) -> Approval | None:
        landed = await self._records.update_if_pending(approval)
        if approval.state is ApprovalState.DENIED:
            self.landed.set()
            await self.release.wait()
        return landed


async def test_an_end_is_told_once_when_the_waiting_call_saw_it_first_and_is_gone(
    store: SqlStore,
) -> None:
    seen: list[Approval] = []
    records = HeldDecision(store.approvals)
    broker = ApprovalBroker(records, FakeClock(T0), on_change=seen.append)  # type: ignore[arg-type]
    waiting = asyncio.create_task(
        broker.request(tool="rm", args={}, session_key="api:s", turn_id="t1")
    )
    approval = await asked(broker)
    deciding = asyncio.create_task(broker.decide(approval.id, "deny", by="ana"))
    await records.landed.wait()  # committed; its teller is held
    broker.recheck(None)  # the waiting call reads the record: denied, it tells and returns
    done = await waiting
    assert done.state is ApprovalState.DENIED
    records.release.set()  # now the decision's own teller comes, the call already gone
    await deciding
    assert [a.state for a in seen] == [ApprovalState.PENDING, ApprovalState.DENIED]
