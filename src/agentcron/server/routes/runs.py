"""Run records and turns, with long polls (`?wait=SECONDS`) for scripts without a WebSocket;
the run history across jobs and the usage per day.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from agentcron.domain.states import RunState
from agentcron.errors import InvalidInputError
from agentcron.server.deps import MAX_WAIT_S, Cron, Cursor, Id, Limit
from agentcron.server.errors import answers
from agentcron.service.paging import DEFAULT_PAGE
from agentcron.session_keys import MAX_SESSION_KEY
from agentcron.views import DailyUsageOut, RunFullOut, RunsOut, TurnDetailOut

router = APIRouter(prefix="/api", tags=["runs"])

_WAIT = Query(
    default=0.0,
    ge=0.0,
    le=MAX_WAIT_S,
    description="seconds to wait for a terminal state before answering (0 = answer now)",
)
SessionFilter = Annotated[
    str | None, Query(max_length=MAX_SESSION_KEY, description="one session's (404: unknown)")
]
JobFilter = Annotated[
    str | None, Query(max_length=100, description="one job's, a deleted one's too (404: unknown)")
]


@router.get("/runs", responses=answers(404))
async def list_runs(
    cron: Cron,
    state: Annotated[
        list[RunState] | None, Query(description="one of the run states; repeat for several")
    ] = None,
    since: Annotated[
        datetime | None,
        Query(description="fired at or after this instant (ISO 8601 with its zone)"),
    ] = None,
    session_key: SessionFilter = None,
    job_id: JobFilter = None,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
) -> RunsOut:
    """The run history across jobs, newest fire first; every run carries its job's name (a
    deleted job's too). `next_cursor` is null on the last page.
    """
    page = await cron.runs.page(
        job_id=job_id,
        session_key=session_key,
        states=state,
        since=since,
        limit=limit,
        cursor=cursor,
    )
    return RunsOut.of_page(page)


@router.get("/runs/{run_id}", responses=answers(404))
async def get_run(run_id: Id, cron: Cron, wait: float = _WAIT) -> RunFullOut:
    """The full run record: rendered prompt, variables, usage, error details, delivery."""
    return RunFullOut.of(await cron.runs.get_or_wait(run_id, wait))


@router.get("/turns/{turn_id}", responses=answers(404))
async def get_turn(turn_id: Id, cron: Cron, wait: float = _WAIT) -> TurnDetailOut:
    return TurnDetailOut.of_detail(await cron.sessions.turn_detail(turn_id, wait=wait))


_DAY_OR_INSTANT = "a day (YYYY-MM-DD, in `tz`) or an instant with its zone"


@router.get("/usage", responses=answers(404))
async def usage(
    cron: Cron,
    session_key: SessionFilter = None,
    job_id: JobFilter = None,
    since: str | None = Query(
        default=None, max_length=40, description=f"from: {_DAY_OR_INSTANT} (default 30 days ago)"
    ),
    until: str | None = Query(
        default=None, max_length=40, description=f"to: {_DAY_OR_INSTANT}, included (default now)"
    ),
    tz: str = Query(default="UTC", max_length=100, description="the zone the days are in"),
) -> DailyUsageOut:
    """Tokens, cost, runs and turns per day, per session and per job (a person's own turns:
    `job_id` null), with the sums; at most 366 days at once.
    """
    found = await cron.runs.usage(
        session_key=session_key,
        job_id=job_id,
        since=_day_or_instant(since, "since"),
        until=_day_or_instant(until, "until"),
        tz=tz,
    )
    return DailyUsageOut.of_usage(found)


def _day_or_instant(text: str | None, name: str) -> date | datetime | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"{name}: expected {_DAY_OR_INSTANT}, not {text!r}") from None
