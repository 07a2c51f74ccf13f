"""Approvals survive a restart as records, and nothing they asked for runs later by surprise.

A chat turn and a scheduled turn each wait for a person's approval when the process stops,
gracefully or by kill -9 (a real child process, tests/integration/approval_restart_child.py).
The next process on the same database: both turns are interrupted with the visible notice,
both approvals are expired (listed so by the API), a late decision is a 409, and the tool's
side effect (a file) never happens, although the restarted process would run the tool at once.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.domain.sessions import Role
from agentcron.domain.states import RunState, TurnState
from agentcron.runtime.clock import SystemClock
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory
from tests.integration.approval_restart_child import CHAT, SCHEDULED, touch
from tests.integration.child_process import ChildProcess

CHILD = Path(__file__).with_name("approval_restart_child.py")
MIN = timedelta(minutes=1)
NOTICE = "This turn was interrupted because agentcron stopped."


async def requested(cron: AgentCron, count: int) -> list[Approval]:
    for _ in range(1000):
        found = await cron.approvals.list()
        if len(found) >= count:
            return found
        await asyncio.sleep(0.005)
    raise AssertionError(f"not {count} approvals requested")


async def restarted(make_cron: CronFactory, **kw: object) -> AgentCron:
    """The next process, on the same database. `touch` is allowed here: if a cut-off call
    were ever re-run, it would run at once and leave its file.
    """
    return await make_cron(
        runner=None,
        model=OfflineModel(0),
        tools=[touch],
        tool_policy={"touch": "allow"},
        **kw,
    )


async def check_after_restart(
    cron: AgentCron,
    chat_turn: str,
    waited: list[Approval],
    folder: Path,
    *,
    decided_by: str,
    later: FakeClock | None = None,
) -> None:
    await wait_settled(cron.engine)
    # both turns were cut off and say so in their chats
    turn = await cron.sessions.turn(chat_turn)
    assert turn.state is TurnState.INTERRUPTED
    (run,) = await cron.runs.list(session_key=SCHEDULED)
    assert run.state is RunState.INTERRUPTED
    (fired,) = await cron.sessions.turns(SCHEDULED)
    assert fired.state is TurnState.INTERRUPTED
    for key in (CHAT, SCHEDULED):
        last = (await cron.sessions.messages(key))[-1]
        assert (last.role, last.content) == (Role.ASSISTANT, NOTICE)
    # both approvals ended: none pending, each expired
    assert await cron.approvals.list() == []
    ended = await cron.approvals.list(pending_only=False)
    assert sorted(a.id for a in ended) == sorted(a.id for a in waited)
    assert {(a.tool, a.state, a.decision, a.decided_by) for a in ended} == {
        ("touch", ApprovalState.EXPIRED, "deny", decided_by)
    }
    assert {a.turn_id for a in ended} == {chat_turn, fired.id}
    # the API shows them expired; a late decision is refused
    app = create_app(cron, token="t")
    transport = httpx.ASGITransport(app=app)
    auth = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=auth) as api:
        listed = (await api.get("/api/approvals", params={"all": "true"})).json()["approvals"]
        assert sorted((a["id"], a["state"], a["decided_by"]) for a in listed) == sorted(
            (a.id, "expired", decided_by) for a in waited
        )
        assert (await api.get("/api/approvals")).json() == {"approvals": [], "next_cursor": None}
        for approval in waited:
            late = await api.post(f"/api/approvals/{approval.id}", json={"decision": "approve"})
            assert late.status_code == 409, late.text
            assert late.json() == {
                "error": "conflict",
                "detail": f"approval {approval.id} is already expired",
            }
    # nothing runs later: not now, not after the schedule moves on
    if later is not None:
        later.advance(10 * MIN)
    await wait_settled(cron.engine)
    assert await cron.approvals.list() == []
    ran = await asyncio.to_thread(lambda: [n for n in ("chat", "fire") if (folder / n).exists()])
    assert ran == []  # the tool never ran, for either turn
    assert len(await cron.runs.list(session_key=SCHEDULED)) == 1


async def test_a_graceful_stop_while_two_turns_wait_for_approval(
    make_cron: CronFactory, clock: FakeClock, tmp_path: Path
) -> None:
    cron = await make_cron(
        runner=None, model=OfflineModel(0), tools=[UserTool(touch, requires_approval=True)]
    )
    await cron.jobs.create(
        name="daily",
        when="in 1m",
        message=f"call touch with path={tmp_path}/fire",
        session_key=SCHEDULED,
    )
    chat = await cron.sessions.send(CHAT, f"call touch with path={tmp_path}/chat")
    clock.advance(MIN)
    waited = await requested(cron, 2)
    await cron.close(grace=0.05)  # the turns are cut: their waits end as "cancelled"
    again = await restarted(make_cron)
    await check_after_restart(again, chat.id, waited, tmp_path, decided_by="cancelled", later=clock)


@pytest.mark.slow
async def test_a_crash_while_two_turns_wait_for_approval(
    make_cron: CronFactory, db_path: Path, tmp_path: Path
) -> None:
    child = ChildProcess.start(
        CHILD, [str(db_path), str(tmp_path)], tmp_path / "child.log", "waiting for approval"
    )
    try:
        await asyncio.to_thread(child.wait_ready, 30.0)
        _, chat_turn = child.out.decode().split("ready", 1)[1].split()[:2]
        child.kill9()
        assert child.tracebacks() is None
    finally:
        child.close()
    # the records as the dead process left them: both pending
    again = await restarted(make_cron, clock=SystemClock(), start=False)
    await again.store.open()
    waited = await again.approvals.list()
    assert [a.state for a in waited] == [ApprovalState.PENDING] * 2
    await again.start()  # turn recovery, then the approvals nobody waits for expire
    await check_after_restart(again, chat_turn, waited, tmp_path, decided_by="restart")
