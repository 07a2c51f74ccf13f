"""Sessions: create, list, read the transcript, send messages, stop, delete; their recall."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from agentcron.config import UNIFIED_SESSION_KEY
from agentcron.events import SessionDeleted
from agentcron.schedule import EverySpec
from agentcron.server.deps import Cron
from agentcron.store.models import ACTIVE_STATES, Job, JobKind, RecallState
from agentcron.views import (
    job_view,
    message_view,
    recall_view,
    run_view,
    session_view,
    turn_view,
)

router = APIRouter(prefix="/api/sessions", tags=["sessions"])


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


async def _active_runs(cron: Cron, jobs: list[Job]) -> dict[str, Any]:
    if not jobs:
        return {}
    active = await cron.runs.list(states=sorted(ACTIVE_STATES), limit=None)
    ids = {j.id for j in jobs}
    found: dict[str, Any] = {}
    for run in sorted(active, key=lambda r: r.fire_at):
        if run.job_id in ids:
            found.setdefault(run.job_id, run)
    return found


async def jobs_with_state(cron: Cron, jobs: list[Job]) -> list[dict[str, Any]]:
    active = await _active_runs(cron, jobs)
    return [job_view(j, active_run=active.get(j.id)) for j in jobs]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_session(body: SessionCreate, cron: Cron) -> dict[str, Any]:
    session = await cron.sessions.create(
        body.key, title=body.title, tz=body.tz, channel_meta=body.channel_meta
    )
    return session_view(session)


@router.get("")
async def list_sessions(
    cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> dict[str, Any]:
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


@router.get("/{key}")
async def get_session(key: str, cron: Cron) -> dict[str, Any]:
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


@router.get("/{key}/messages")
async def list_messages(
    key: str,
    cron: Cron,
    after: int | None = Query(default=None, ge=0, description="a seq: entries after it"),
    limit: int | None = Query(default=None, ge=1, le=10_000),
) -> dict[str, Any]:
    await cron.sessions.get(key)
    messages = await cron.sessions.messages(key, after=after, limit=limit)
    return {
        "session_key": key,
        "messages": [message_view(m) for m in messages],
        "next_after": messages[-1].seq if messages else after,
    }


@router.post(
    "/{key}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    responses={201: {"description": "a note (`trigger: false`): stored, no turn"}},
)
async def send_message(key: str, body: MessageCreate, cron: Cron) -> Any:
    """A message from the user: it runs as a turn (202). With `trigger: false` it is a note
    (seed 004 `triggerAgent=false`): stored in the transcript, no turn (201).
    """
    if not body.trigger:
        message = await cron.sessions.note(key, body.content)
        return JSONResponse(
            {"session_key": key, "turn_id": None, "message": message_view(message)},
            status_code=status.HTTP_201_CREATED,
        )
    turn = await cron.sessions.send(key, body.content)
    return {"turn_id": turn.id, "session_key": key, "state": turn.state.value}


@router.post("/{key}/send", status_code=status.HTTP_201_CREATED)
async def send_out(key: str, body: MessageOut, cron: Cron) -> dict[str, Any]:
    """Send a message out through the session's channel without the agent (seed 004 `send`):
    stored as an assistant entry (`sent_by: operator`) and delivered like a reply; its
    delivery shows in `GET /api/deliveries`.
    """
    message = await cron.sessions.deliver(key, body.content)
    return {"session_key": key, "message": message_view(message)}


@router.get("/{key}/turns")
async def list_turns(
    key: str, cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> dict[str, Any]:
    await cron.sessions.get(key)
    return {"turns": [turn_view(t) for t in await cron.sessions.turns(key, limit=limit)]}


@router.post("/{key}/stop")
async def stop_turn(key: str, cron: Cron) -> dict[str, Any]:
    await cron.sessions.get(key)
    running = cron.sessions.running_turn(key)
    return {"stopped": await cron.sessions.stop(key), "turn_id": running}


@router.delete("/{key}")
async def delete_session(
    key: str,
    cron: Cron,
    confirm: bool = Query(default=False, description="also delete the session's bound automations"),
) -> dict[str, Any]:
    answer = await cron.sessions.delete(key, confirm=confirm)
    if answer.get("deleted"):
        await cron.publish(SessionDeleted(session_key=key))
    return answer


@router.get("/{key}/runs")
async def session_runs(
    key: str, cron: Cron, limit: int = Query(default=50, ge=1, le=1000)
) -> dict[str, Any]:
    runs = await cron.runs.list(session_key=key, limit=limit)
    return {"runs": [run_view(r) for r in runs]}


@router.get("/{key}/usage")
async def session_usage(key: str, cron: Cron) -> dict[str, Any]:
    await cron.sessions.get(key)
    return await cron.sessions.usage(key)


async def _recall(cron: Cron, key: str) -> Job | None:
    await cron.sessions.get(key)
    recalls = await cron.jobs.list(session_key=key, kind=JobKind.RECALL)
    return recalls[0] if recalls else None


@router.get("/{key}/recalls")
async def list_recalls(
    key: str,
    cron: Cron,
    state: Annotated[
        list[RecallState] | None,
        Query(description="pending, fired or cancelled; repeat for several (default all)"),
    ] = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> dict[str, Any]:
    """The session's recalls (seed 003): the pending one, then those that fired or were
    cancelled, newest first, with their times.
    """
    await cron.sessions.get(key)
    recalls = await cron.jobs.recalls(key, states=state, limit=limit)
    return {"recalls": [recall_view(r) for r in recalls]}


@router.get("/{key}/recall")
async def get_recall(key: str, cron: Cron) -> dict[str, Any]:
    recall = await _recall(cron, key)
    return {"recall": None if recall is None else job_view(recall)}


@router.delete("/{key}/recall")
async def cancel_recall(key: str, cron: Cron) -> dict[str, Any]:
    recall = await _recall(cron, key)
    if recall is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"session {key!r} has no pending recall")
    await cron.jobs.delete(recall.id)
    return {"cancelled": recall.id}


@router.post("/{key}/recall/skip")
async def skip_recall(key: str, cron: Cron) -> dict[str, Any]:
    recall = await _recall(cron, key)
    if recall is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"session {key!r} has no pending recall")
    if not isinstance(recall.spec, EverySpec):
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            "only a recurring recall can skip an occurrence; cancel a one-time recall instead",
        )
    return {"recall": job_view(await cron.jobs.skip_next(recall.id))}
