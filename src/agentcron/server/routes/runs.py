"""Run records and turns, with long polls (`?wait=SECONDS`) for scripts without a WebSocket."""

from __future__ import annotations

from fastapi import APIRouter, Query

from agentcron.server.deps import MAX_WAIT_S, Cron, Id
from agentcron.server.errors import answers
from agentcron.views import RunFullOut, TurnDetailOut

router = APIRouter(prefix="/api", tags=["runs"])

_WAIT = Query(
    default=0.0,
    ge=0.0,
    le=MAX_WAIT_S,
    description="seconds to wait for a terminal state before answering (0 = answer now)",
)


@router.get("/runs/{run_id}", responses=answers(404))
async def get_run(run_id: Id, cron: Cron, wait: float = _WAIT) -> RunFullOut:
    """The full run record: rendered prompt, variables, usage, error details, delivery."""
    return RunFullOut.of(await cron.runs.get_or_wait(run_id, wait))


@router.get("/turns/{turn_id}", responses=answers(404))
async def get_turn(turn_id: Id, cron: Cron, wait: float = _WAIT) -> TurnDetailOut:
    return TurnDetailOut.of_detail(await cron.sessions.turn_detail(turn_id, wait=wait))
