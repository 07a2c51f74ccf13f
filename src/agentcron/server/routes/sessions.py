"""Sessions: create, list, read the transcript, send messages, stop, delete; their recall."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, status
from fastapi.responses import JSONResponse

from agentcron import views
from agentcron.domain.jobs import RecallState
from agentcron.errors import InvalidInputError
from agentcron.limits import check_text
from agentcron.server.deps import Cron
from agentcron.server.middleware import key_from_path
from agentcron.service.sessions import MessageCreate, MessageOut, SessionCreate
from agentcron.session_keys import MAX_SESSION_KEY, SESSION_KEY_HELP

router = APIRouter(prefix="/api/sessions", tags=["sessions"])


async def key_param(
    key: Annotated[str, Path(description=f"the session key, percent-encoded; {SESSION_KEY_HELP}")],
) -> str:
    """The session key of the path (`/` and `%` percent-encoded, see SessionKeyPath)."""
    decoded = key_from_path(key)
    if len(decoded) > MAX_SESSION_KEY:
        raise InvalidInputError(f"session key too long (at most {MAX_SESSION_KEY} characters)")
    return check_text(decoded, "the session key")


Key = Annotated[str, Depends(key_param)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_session(body: SessionCreate, cron: Cron) -> dict[str, Any]:
    session = await cron.sessions.create(
        body.key, title=body.title, tz=body.tz, channel_meta=body.channel_meta
    )
    return views.session_view(session)


@router.get("")
async def list_sessions(
    cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> dict[str, Any]:
    """Every session with its automation count, pending recall and running turn."""
    return views.sessions_answer(await cron.sessions.listing(limit=limit))


@router.get("/{key}")
async def get_session(key: Key, cron: Cron) -> dict[str, Any]:
    """A session with its automations (and their state), its recall and its usage."""
    return views.session_detail_view(await cron.sessions.detail(key))


@router.get("/{key}/messages")
async def list_messages(
    key: Key,
    cron: Cron,
    after: int | None = Query(default=None, ge=0, le=2**53, description="a seq: entries after it"),
    limit: int | None = Query(default=None, ge=1, le=10_000),
) -> dict[str, Any]:
    messages = await cron.sessions.transcript(key, after=after, limit=limit)
    return views.messages_answer(key, messages, after)


@router.post(
    "/{key}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    responses={201: {"description": "a note (`trigger: false`): stored, no turn"}},
)
async def send_message(key: Key, body: MessageCreate, cron: Cron) -> Any:
    """A message from the user: it runs as a turn (202). With `trigger: false` it is a note
    (seed 004 `triggerAgent=false`): stored in the transcript, no turn (201).
    """
    if not body.trigger:
        note = views.note_answer(await cron.sessions.note(key, body.content))
        return JSONResponse(note, status_code=status.HTTP_201_CREATED)
    return views.turn_started_answer(await cron.sessions.send(key, body.content, create=False))


@router.post("/{key}/send", status_code=status.HTTP_201_CREATED)
async def send_out(key: Key, body: MessageOut, cron: Cron) -> dict[str, Any]:
    """Send a message out through the session's channel without the agent (seed 004 `send`):
    stored as an assistant entry (`sent_by: operator`) and delivered like a reply; its
    delivery shows in `GET /api/deliveries`.
    """
    return views.sent_answer(await cron.sessions.deliver(key, body.content))


@router.get("/{key}/turns")
async def list_turns(
    key: Key, cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> dict[str, Any]:
    return {"turns": [views.turn_view(t) for t in await cron.sessions.turn_list(key, limit=limit)]}


@router.post("/{key}/stop")
async def stop_turn(key: Key, cron: Cron) -> dict[str, Any]:
    stopped, turn_id = await cron.sessions.stop_running(key)
    return {"stopped": stopped, "turn_id": turn_id}


@router.delete("/{key}")
async def delete_session(
    key: Key,
    cron: Cron,
    confirm: bool = Query(default=False, description="also delete the session's bound automations"),
) -> dict[str, Any]:
    """Two-step when it has automations: without `confirm` they are listed, nothing goes."""
    return views.deletion_view(await cron.sessions.delete(key, confirm=confirm))


@router.get("/{key}/runs")
async def session_runs(
    key: Key, cron: Cron, limit: int = Query(default=50, ge=1, le=1000)
) -> dict[str, Any]:
    return views.runs_answer(await cron.runs.list(session_key=key, limit=limit))


@router.get("/{key}/usage")
async def session_usage(key: Key, cron: Cron) -> dict[str, Any]:
    return await cron.sessions.usage_of(key)


@router.get("/{key}/recalls")
async def list_recalls(
    key: Key,
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
    recalls = await cron.sessions.recalls(key, states=state, limit=limit)
    return {"recalls": [views.recall_view(r) for r in recalls]}


@router.get("/{key}/recall")
async def get_recall(key: Key, cron: Cron) -> dict[str, Any]:
    recall = await cron.sessions.recall(key)
    return {"recall": None if recall is None else views.job_view(recall)}


@router.delete("/{key}/recall")
async def cancel_recall(key: Key, cron: Cron) -> dict[str, Any]:
    return {"cancelled": (await cron.sessions.cancel_recall(key)).id}


@router.post("/{key}/recall/skip")
async def skip_recall(key: Key, cron: Cron) -> dict[str, Any]:
    return {"recall": views.job_view(await cron.sessions.skip_recall(key))}
