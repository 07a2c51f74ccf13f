"""Run records and turns, with long polls (`?wait=SECONDS`) for scripts without a WebSocket."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from agentcron.server.deps import MAX_WAIT_S, Cron
from agentcron.views import run_view, turn_view

router = APIRouter(prefix="/api", tags=["runs"])

_WAIT = Query(
    default=0.0,
    ge=0.0,
    le=MAX_WAIT_S,
    description="seconds to wait for a terminal state before answering (0 = answer now)",
)


@router.get("/runs/{run_id}")
async def get_run(run_id: str, cron: Cron, wait: float = _WAIT) -> dict[str, Any]:
    """The full run record: rendered prompt, variables, usage, error details, delivery."""
    run = await cron.runs.wait(run_id, wait) if wait else await cron.runs.get(run_id)
    return run_view(run, full=True)


@router.get("/turns/{turn_id}")
async def get_turn(turn_id: str, cron: Cron, wait: float = _WAIT) -> dict[str, Any]:
    turn = (
        await cron.sessions.wait_turn(turn_id, wait) if wait else await cron.sessions.turn(turn_id)
    )
    view = turn_view(turn)
    if turn.reply_message_id is not None:
        reply = await cron.store.sessions.get_message(turn.reply_message_id)
        view["reply"] = None if reply is None else reply.content
    return view
