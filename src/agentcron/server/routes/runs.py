"""Run records and turns, with long polls (`?wait=SECONDS`) for scripts without a WebSocket."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from agentcron import views
from agentcron.server.deps import MAX_WAIT_S, Cron, Id

router = APIRouter(prefix="/api", tags=["runs"])

_WAIT = Query(
    default=0.0,
    ge=0.0,
    le=MAX_WAIT_S,
    description="seconds to wait for a terminal state before answering (0 = answer now)",
)


@router.get("/runs/{run_id}")
async def get_run(run_id: Id, cron: Cron, wait: float = _WAIT) -> dict[str, Any]:
    """The full run record: rendered prompt, variables, usage, error details, delivery."""
    return views.run_view(await cron.runs.get_or_wait(run_id, wait), full=True)


@router.get("/turns/{turn_id}")
async def get_turn(turn_id: Id, cron: Cron, wait: float = _WAIT) -> dict[str, Any]:
    return views.turn_detail_view(await cron.sessions.turn_detail(turn_id, wait=wait))
