"""The lifecycle of approvals beyond a decision: a graceful stop does not wait for a person, a
decision made by another process is announced by the one whose turn waits, approvals whose
turn was cut off elsewhere are reaped by the periodic reap, and deleting a session expires its
pending approvals (the offline model, a real AgentCron; the deletion on SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput, paused
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.approvals import (
    CANCELLED_DECIDER,
    RESTART_DECIDER,
    SESSION_DELETED_DECIDER,
    Approval,
    ApprovalError,
    ApprovalState,
    new_approval,
)
from agentcron.domain.events import ApprovalDecided
from agentcron.domain.sessions import Role
from agentcron.domain.states import TurnState
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.ids import new_id
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.store_setup import take_turn_lease

MIN = timedelta(minutes=1)
NOTICE = "This turn was interrupted because agentcron stopped."
calls: list[str] = []


def delete_file(path: str) -> str:
    """Delete a file."""
    calls.append(f"delete {path}")
    return f"deleted {path}"


async def work(seconds: float) -> str:
    """Work for a while."""
    await asyncio.sleep(seconds)
    calls.append(f"worked {seconds}")
    return f"worked {seconds} s"


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


async def gated(make_cron: CronFactory, **kw: object) -> AgentCron:
    """The built-in agent with `delete_file` (needs approval) and `work` (allowed)."""
    kw.setdefault("model", OfflineModel(0))
    kw.setdefault("settings", EngineSettings(max_concurrent_runs=2))
    return await make_cron(
        runner=None, tools=[UserTool(delete_file, requires_approval=True), work], **kw
    )


async def requested(cron: AgentCron, key: str | None = None, count: int = 1) -> list[Approval]:
    for _ in range(1000):
        found = await cron.approvals.list(key)
        if len(found) >= count:
            assert len(found) == count
            return found
        await asyncio.sleep(0.005)
    raise AssertionError(f"not {count} approvals requested")


def decided_events(cron: AgentCron) -> list[ApprovalDecided]:
    seen: list[ApprovalDecided] = []
    cron.subscribe(seen.append, types=[ApprovalDecided])
    return seen


# -- a graceful stop -------------------------------------------------------------------------


async def test_a_graceful_stop_cuts_a_waiting_turn_at_once_and_lets_a_working_one_finish(
    make_cron: CronFactory,
) -> None:
    cron = await gated(make_cron)
    waiting = await cron.sessions.send("websocket:waits", "call delete_file with path=/a")
    (approval,) = await requested(cron)
    working = await cron.sessions.send("websocket:works", "call work with seconds=0.5")
    for _ in range(500):
        if cron.status().turns_in_runner == 1:
            break
        await asyncio.sleep(0.002)
    assert cron.status().turns_in_runner == 1
    decided = decided_events(cron)

    started = time.monotonic()
    await cron.close(grace=30)  # the old behaviour waited all 30 s for a person
    assert time.monotonic() - started < 5

    assert calls == ["worked 0.5"]  # the working turn had its grace; delete_file never ran
    again = await gated(make_cron)  # the records, read back by the next process
    gone = await again.approvals.get(approval.id)
    assert (gone.state, gone.decided_by) == (ApprovalState.EXPIRED, CANCELLED_DECIDER)
    assert [(e.approval_id, e.decided_by) for e in decided] == [(approval.id, CANCELLED_DECIDER)]
    assert (await again.sessions.turn(waiting.id)).state is TurnState.INTERRUPTED
    last = (await again.sessions.messages("websocket:waits"))[-1]
    assert (last.role, last.content) == (Role.ASSISTANT, NOTICE)
    assert (await again.sessions.turn(working.id)).state is TurnState.SUCCEEDED
    await wait_settled(again.engine)
    assert calls == ["worked 0.5"]


class WorksThenWaits:
    """A runner of one's own that works `before` s, then waits for an approval (paused)."""

    def __init__(self, before: float) -> None:
        self.before = before
        self.cron: AgentCron | None = None
        self.approved: list[Approval] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        assert self.cron is not None
        await asyncio.sleep(self.before)
        async with paused():
            approval = await self.cron.approvals.broker.request(
                tool="deploy", args={}, session_key=session.key, turn_id=turn.turn_id
            )
        self.approved.append(approval)
        return Outcome.succeeded("deployed")


async def test_a_turn_that_pauses_during_the_grace_is_cut_as_it_pauses(
    make_cron: CronFactory,
) -> None:
    runner = WorksThenWaits(before=0.3)
    cron = await make_cron(runner=runner)
    runner.cron = cron
    turn = await cron.sessions.send("api:deploy", "deploy it")
    for _ in range(500):
        if cron.status().turns_in_runner == 1:
            break
        await asyncio.sleep(0.002)
    started = time.monotonic()
    await cron.close(grace=30)  # it is working: it gets the grace, until it waits for a person
    took = time.monotonic() - started
    assert 0.2 < took < 5
    assert runner.approved == []  # its wait never ended with an answer: it was cut
    again = await make_cron(runner=runner)
    assert await again.approvals.list() == []  # nothing left pending
    for approval in await again.approvals.list(pending_only=False):
        assert (approval.state, approval.decided_by) == (ApprovalState.EXPIRED, CANCELLED_DECIDER)
    assert (await again.sessions.turn(turn.id)).state is TurnState.INTERRUPTED


# -- a decision made by another process -------------------------------------------------------


async def test_a_decision_made_by_another_process_is_announced_by_the_waiting_one(
    make_cron: CronFactory,
) -> None:
    here = await gated(make_cron)  # the process whose turn waits
    here.approvals.broker.poll = 0.02  # its re-read of the record, on real time
    elsewhere = await gated(make_cron)  # another replica on the same database
    told_here, told_elsewhere = decided_events(here), decided_events(elsewhere)
    turn = await here.sessions.send("websocket:chat", "call delete_file with path=/a")
    (approval,) = await requested(here)

    await elsewhere.approvals.decide(approval.id, "approve", by="bob")
    done = await here.sessions.wait_turn(turn.id, 5)
    assert done.state is TurnState.SUCCEEDED, done.error
    assert calls == ["delete /a"]
    await asyncio.sleep(0.1)  # several more re-reads: nothing is announced twice
    await wait_settled(here.engine)
    for told in (told_here, told_elsewhere):  # each process tells its own clients, once
        assert [(e.approval_id, e.state, e.decided_by) for e in told] == [
            (approval.id, "approved", "bob")
        ]


async def test_a_decision_in_the_same_process_is_announced_once_despite_the_re_reads(
    make_cron: CronFactory,
) -> None:
    cron = await gated(make_cron)
    cron.approvals.broker.poll = 0.001  # re-reads race the decision's own announcement
    told = decided_events(cron)
    for i in range(5):
        turn = await cron.sessions.send("websocket:chat", f"call delete_file with path=/{i}")
        (approval,) = await requested(cron)
        await cron.approvals.decide(approval.id, "deny", by="ana")
        assert (await cron.sessions.wait_turn(turn.id, 5)).state is TurnState.SUCCEEDED
    await asyncio.sleep(0.05)
    assert [e.state for e in told] == ["denied"] * 5
    assert len({e.approval_id for e in told}) == 5
    assert calls == []


# -- the periodic reap ------------------------------------------------------------------------


async def test_the_periodic_reap_expires_approvals_of_turns_cut_off_elsewhere(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await gated(make_cron, approval_timeout=30 * MIN)
    told = decided_events(cron)
    sessions, now = cron.store.sessions, clock.now()
    # another host's turn waited for approval when that host died: its lease runs out
    other_host = "elsewhere.example:4242:01HOST"
    await sessions.ensure_session("websocket:far", now)
    far = await sessions.open_turn(
        "websocket:far", "user", "delete it", now, state=TurnState.RUNNING, owner=other_host
    )
    taken = await take_turn_lease(cron.store, "websocket:far", other_host, far.id, now, now + MIN)
    assert taken is None
    orphan = await cron.store.approvals.insert(
        new_approval(
            tool="delete_file",
            args={"path": "/far"},
            session_key="websocket:far",
            turn_id=far.id,
            now=now,
            timeout=30 * MIN,
            approval_id=new_id(),
        )
    )
    # an approval that names no turn (a caller of the broker's own): only a start may reap it
    turnless = await cron.store.approvals.insert(
        new_approval(
            tool="x",
            args={},
            session_key=None,
            turn_id=None,
            now=now,
            timeout=30 * MIN,
            approval_id=new_id(),
        )
    )
    # and this process's own turn, waiting for a person
    mine = await cron.sessions.send("websocket:near", "call delete_file with path=/near")
    (waiting,) = await requested(cron, "websocket:near")

    clock.advance(2 * MIN)  # past the other host's lease and the reap interval
    for _ in range(500):
        if not (await cron.approvals.get(orphan.id)).pending:
            break
        await asyncio.sleep(0.005)
    reaped = await cron.approvals.get(orphan.id)
    assert (reaped.state, reaped.decision, reaped.decided_by) == (
        ApprovalState.EXPIRED,
        "deny",
        RESTART_DECIDER,
    )
    assert reaped.decided_at is not None
    assert reaped.decided_at > now + MIN  # at the reap, on the engine's clock
    assert (await cron.sessions.turn(far.id)).state is TurnState.INTERRUPTED
    await wait_settled(cron.engine, busy_ok=True)
    assert [(e.approval_id, e.decided_by) for e in told] == [(orphan.id, RESTART_DECIDER)]
    # the live turn's approval and the turnless one are left alone
    assert (await cron.approvals.get(waiting.id)).pending
    assert (await cron.approvals.get(turnless.id)).pending
    assert (await cron.sessions.turn(mine.id)).state is TurnState.RUNNING
    with pytest.raises(ApprovalError, match="already expired"):  # a late decision: a 409
        await cron.approvals.decide(orphan.id, "approve", by="ana")
    await cron.approvals.decide(waiting.id, "deny", by="ana")
    await wait_settled(cron.engine)
    assert calls == []


# -- deleting a session -----------------------------------------------------------------------


@pytest.mark.parametrize("cron_backend", BACKENDS)
async def test_deleting_a_session_expires_its_pending_approvals_and_keeps_the_records(
    make_cron: CronFactory,
) -> None:
    cron = await gated(make_cron)
    key, other = "websocket:doomed", "websocket:stays"
    first = await cron.sessions.send(key, "call delete_file with path=/1")
    (decided,) = await requested(cron, key)
    await cron.approvals.decide(decided.id, "deny", by="ana")
    await cron.sessions.wait_turn(first.id, 5)
    await cron.sessions.send(key, "call delete_file with path=/2")
    (waiting,) = await requested(cron, key)
    await cron.sessions.send(other, "call delete_file with path=/3")
    (elsewhere,) = await requested(cron, other)
    told = decided_events(cron)

    deleted = await cron.sessions.delete(key)
    assert deleted.deleted
    await wait_settled(cron.engine, busy_ok=True)

    with pytest.raises(SessionNotFoundError):
        await cron.sessions.get(key)
    assert await cron.approvals.list(key) == []  # nothing of it waits for anybody
    gone = await cron.approvals.get(waiting.id)  # the record stays, like the session's runs
    assert (gone.state, gone.decision, gone.decided_by) == (
        ApprovalState.EXPIRED,
        "deny",
        SESSION_DELETED_DECIDER,
    )
    kept = await cron.approvals.get(decided.id)
    assert (kept.state, kept.decided_by) == (ApprovalState.DENIED, "ana")
    listed = await cron.approvals.list(key, pending_only=False)
    assert sorted(a.id for a in listed) == sorted([decided.id, waiting.id])
    assert [(e.approval_id, e.decided_by) for e in told] == [(waiting.id, SESSION_DELETED_DECIDER)]
    untouched = await cron.approvals.list(other)
    assert [a.id for a in untouched] == [elsewhere.id]  # another session's still waits
    await cron.approvals.decide(elsewhere.id, "approve", by="ana")
    await wait_settled(cron.engine)
    assert calls == ["delete /3"]  # the deleted session's call never ran
