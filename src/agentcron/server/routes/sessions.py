"""Sessions: create, list, read the transcript, send messages, stop, delete; their recall."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse

from agentcron.server.deps import Cron
from agentcron.service import sessions as service
from agentcron.service.sessions import MessageCreate, MessageOut, SessionCreate
from agentcron.store.models import RecallState

router = APIRouter(prefix="/api/sessions", tags=["sessions"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_session(body: SessionCreate, cron: Cron) -> dict[str, Any]:
    return await service.create_session(cron, body)


@router.get("")
async def list_sessions(
    cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> dict[str, Any]:
    return await service.list_sessions(cron, limit=limit)


@router.get("/{key}")
async def get_session(key: str, cron: Cron) -> dict[str, Any]:
    return await service.get_session(cron, key)


@router.get("/{key}/messages")
async def list_messages(
    key: str,
    cron: Cron,
    after: int | None = Query(default=None, ge=0, description="a seq: entries after it"),
    limit: int | None = Query(default=None, ge=1, le=10_000),
) -> dict[str, Any]:
    return await service.list_messages(cron, key, after=after, limit=limit)


@router.post(
    "/{key}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    responses={201: {"description": "a note (`trigger: false`): stored, no turn"}},
)
async def send_message(key: str, body: MessageCreate, cron: Cron) -> Any:
    """A message from the user: it runs as a turn (202). With `trigger: false` it is a note
    (seed 004 `triggerAgent=false`): stored in the transcript, no turn (201).
    """
    answer = await service.send_message(cron, key, body)
    if answer["turn_id"] is None:
        return JSONResponse(answer, status_code=status.HTTP_201_CREATED)
    return answer


@router.post("/{key}/send", status_code=status.HTTP_201_CREATED)
async def send_out(key: str, body: MessageOut, cron: Cron) -> dict[str, Any]:
    """Send a message out through the session's channel without the agent (seed 004 `send`):
    stored as an assistant entry (`sent_by: operator`) and delivered like a reply; its
    delivery shows in `GET /api/deliveries`.
    """
    return await service.send_out(cron, key, body.content)


@router.get("/{key}/turns")
async def list_turns(
    key: str, cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> dict[str, Any]:
    return await service.list_turns(cron, key, limit=limit)


@router.post("/{key}/stop")
async def stop_turn(key: str, cron: Cron) -> dict[str, Any]:
    return await service.stop_turn(cron, key)


@router.delete("/{key}")
async def delete_session(
    key: str,
    cron: Cron,
    confirm: bool = Query(default=False, description="also delete the session's bound automations"),
) -> dict[str, Any]:
    return await service.delete_session(cron, key, confirm=confirm)


@router.get("/{key}/runs")
async def session_runs(
    key: str, cron: Cron, limit: int = Query(default=50, ge=1, le=1000)
) -> dict[str, Any]:
    return await service.session_runs(cron, key, limit=limit)


@router.get("/{key}/usage")
async def session_usage(key: str, cron: Cron) -> dict[str, Any]:
    return await service.session_usage(cron, key)


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
    return await service.list_recalls(cron, key, states=state, limit=limit)


@router.get("/{key}/recall")
async def get_recall(key: str, cron: Cron) -> dict[str, Any]:
    return await service.get_recall(cron, key)


@router.delete("/{key}/recall")
async def cancel_recall(key: str, cron: Cron) -> dict[str, Any]:
    return await service.cancel_recall(cron, key)


@router.post("/{key}/recall/skip")
async def skip_recall(key: str, cron: Cron) -> dict[str, Any]:
    return await service.skip_recall(cron, key)
