"""Request-scoped access to the running AgentCron, shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from agentcron.app import AgentCron
from agentcron.errors import InvalidInputError
from agentcron.service.paging import DEFAULT_PAGE, MAX_CURSOR, MAX_PAGE


async def get_cron(request: Request) -> AgentCron:
    # async: FastAPI runs a plain `def` dependency in a worker thread, a hop per request
    cron: AgentCron = request.app.state.cron
    return cron


Cron = Annotated[AgentCron, Depends(get_cron)]
# An id in a path (a ULID, 26 characters; agentcron's ids are never longer than this).
Id = Annotated[str, Path(min_length=1, max_length=100, description="an id this API gave")]
# Long polls (?wait=) are bounded so a client cannot hold a request open for ever.
MAX_WAIT_S = 120.0


async def clean_url(request: Request) -> None:
    """Every route: no NUL character in the path or the query (no database stores one)."""
    for name, value in [*request.path_params.items(), *request.query_params.multi_items()]:
        if isinstance(value, str) and "\x00" in value:
            raise InvalidInputError(f"{name} contains a NUL character (%00)")


# A list's page: its size (bounded) and the cursor the previous page gave (`next_cursor`).
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"page size (default {DEFAULT_PAGE})")]
Cursor = Annotated[
    str | None,
    Query(max_length=MAX_CURSOR, description="next_cursor of the previous page, as given"),
]
