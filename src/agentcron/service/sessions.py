"""Sessions: create, list, read, message, note, send, stop, delete; their runs and recalls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentcron.config import UNIFIED_SESSION_KEY
from agentcron.events import SessionDeleted
from agentcron.schedule import EverySpec
from agentcron.service.jobs import jobs_with_state
from agentcron.store.errors import ConflictError, RecallNotFoundError
from agentcron.store.models import Job, JobKind, RecallState
from agentcron.views import job_view, message_view, recall_view, run_view, session_view, turn_view

if TYPE_CHECKING:
    from agentcron.app import AgentCron


class SessionCreate(BaseModel):
    key: str | None = Field(
        default=None, description="`channel:chat_id`, e.g. `websocket:abc`; generated if absent"
    )
    title: str | None = None
    tz: str = Field(default="UTC", description="IANA time zone, e.g. Europe/Berlin")
    channel_meta: dict[str, Any] | None = None


class MessageCreate(BaseModel):
    content: str = Field(min_length=1, description="what the user says")
    trigger: bool = Field(
        default=True,
        description="false: a note in the transcript that starts no turn (the agent sees it "
        "next turn); answered 201 with the message instead of 202 with the turn",
    )


class MessageOut(BaseModel):
    content: str = Field(min_length=1, description="the text to send through the channel")


async def create_session(cron: AgentCron, body: SessionCreate) -> dict[str, Any]:
    session = await cron.sessions.create(
        body.key, title=body.title, tz=body.tz, channel_meta=body.channel_meta
    )
    return session_view(session)


async def list_sessions(cron: AgentCron, *, limit: int | None = None) -> dict[str, Any]:
    """Every session with its automation count, pending recall and running turn."""
    sessions = await cron.sessions.list(limit=limit)
    summary = await cron.store.sessions.job_summary()
    unified = summary.get(UNIFIED_SESSION_KEY, {})
    views = []
    for session in sessions:
        own = summary.get(session.key, {})
        shared = unified if cron.automation_owner(session.key) != session.key else {}
        views.append(
            session_view(
                session,
                automations=own.get("automations", 0) + shared.get("automations", 0),
                has_recall=own.get("recalls", 0) > 0,
                running_turn=cron.sessions.running_turn(session.key),
            )
        )
    return {"sessions": views}


async def get_session(cron: AgentCron, key: str) -> dict[str, Any]:
    """A session with its automations (and their state), its recall and its usage."""
    session = await cron.sessions.get(key)
    jobs = await cron.jobs.for_session(key)
    automations = [j for j in jobs if j.kind is JobKind.AGENT_TURN]
    recall = next((j for j in jobs if j.kind is JobKind.RECALL and j.session_key == key), None)
    return session_view(
        session,
        running_turn=cron.sessions.running_turn(key),
        automations=await jobs_with_state(cron, automations),
        recall=None if recall is None else job_view(recall),
        usage=await cron.sessions.usage(key),
    )


async def list_messages(
    cron: AgentCron, key: str, *, after: int | None = None, limit: int | None = None
) -> dict[str, Any]:
    await cron.sessions.get(key)
    messages = await cron.sessions.messages(key, after=after, limit=limit)
    return {
        "session_key": key,
        "messages": [message_view(m) for m in messages],
        "next_after": messages[-1].seq if messages else after,
    }


async def send_message(cron: AgentCron, key: str, body: MessageCreate) -> dict[str, Any]:
    """A user message, as a turn (`turn_id`); with `trigger` false a note (`message`, no
    turn: seed 004 `triggerAgent=false`).
    """
    if not body.trigger:
        return await note(cron, key, body.content)
    turn = await cron.sessions.send(key, body.content)
    return {"turn_id": turn.id, "session_key": key, "state": turn.state.value}


async def note(cron: AgentCron, key: str, text: str) -> dict[str, Any]:
    message = await cron.sessions.note(key, text)
    return {"session_key": key, "turn_id": None, "message": message_view(message)}


async def send_out(cron: AgentCron, key: str, text: str) -> dict[str, Any]:
    """Out through the session's channel without the agent (seed 004 `send`)."""
    message = await cron.sessions.deliver(key, text)
    return {"session_key": key, "message": message_view(message)}


async def list_turns(cron: AgentCron, key: str, *, limit: int | None = None) -> dict[str, Any]:
    await cron.sessions.get(key)
    return {"turns": [turn_view(t) for t in await cron.sessions.turns(key, limit=limit)]}


async def stop_turn(cron: AgentCron, key: str) -> dict[str, Any]:
    await cron.sessions.get(key)
    running = cron.sessions.running_turn(key)
    return {"stopped": await cron.sessions.stop(key), "turn_id": running}


async def delete_session(cron: AgentCron, key: str, *, confirm: bool = False) -> dict[str, Any]:
    """Two-step when it has automations (see `Sessions.delete`); live views are told."""
    answer = await cron.sessions.delete(key, confirm=confirm)
    if answer.get("deleted"):
        await cron.publish(SessionDeleted(session_key=key))
    return answer


async def session_runs(cron: AgentCron, key: str, *, limit: int = 50) -> dict[str, Any]:
    runs = await cron.runs.list(session_key=key, limit=limit)
    return {"runs": [run_view(r) for r in runs]}


async def session_usage(cron: AgentCron, key: str) -> dict[str, Any]:
    await cron.sessions.get(key)
    return await cron.sessions.usage(key)


async def _recall(cron: AgentCron, key: str) -> Job | None:
    await cron.sessions.get(key)
    recalls = await cron.jobs.list(session_key=key, kind=JobKind.RECALL)
    return recalls[0] if recalls else None


async def list_recalls(
    cron: AgentCron, key: str, *, states: list[RecallState] | None = None, limit: int = 100
) -> dict[str, Any]:
    """The session's recalls (seed 003): pending, then fired or cancelled, newest first."""
    await cron.sessions.get(key)
    recalls = await cron.jobs.recalls(key, states=states, limit=limit)
    return {"recalls": [recall_view(r) for r in recalls]}


async def get_recall(cron: AgentCron, key: str) -> dict[str, Any]:
    recall = await _recall(cron, key)
    return {"recall": None if recall is None else job_view(recall)}


async def cancel_recall(cron: AgentCron, key: str) -> dict[str, Any]:
    recall = await _recall(cron, key)
    if recall is None:
        raise RecallNotFoundError(key)
    await cron.jobs.delete(recall.id)
    return {"cancelled": recall.id}


async def skip_recall(cron: AgentCron, key: str) -> dict[str, Any]:
    recall = await _recall(cron, key)
    if recall is None:
        raise RecallNotFoundError(key)
    if not isinstance(recall.spec, EverySpec):
        raise ConflictError(
            "only a recurring recall can skip an occurrence; cancel a one-time recall instead"
        )
    return {"recall": job_view(await cron.jobs.skip_next(recall.id))}
