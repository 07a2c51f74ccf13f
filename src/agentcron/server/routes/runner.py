"""Your own agent over HTTP: the wire protocol's JSON Schema, and the approval callback.

`GET /api/schema/runner.json` takes the API token like the rest of the API. `POST
/api/runner/approvals` is the remote agent's, authorized by the runner secret as its bearer
token (the agent has it to check the requests' signatures), not by the API token: it waits
for a person's decision on a tool call of a turn whose request is still open, and answers it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, HTTPException, Request, status
from pydantic import BaseModel, ConfigDict, Field

from agentcron.agent.http_runner import NO_ONE_TO_ASK, runner_schema
from agentcron.domain.approvals import denial_text
from agentcron.limits import NameText
from agentcron.server.auth import bearer, token_matches
from agentcron.server.deps import Cron
from agentcron.server.errors import BODY, answers
from agentcron.views import ApprovalOut, RunnerApprovalOut, RunnerSchemaOut

router = APIRouter(tags=["runner"])
# Included with the API token's guard (the callback above is the runner secret's).
schema_router = APIRouter(tags=["runner"])

_MAX_ID = 200
_MAX_WAIT_S = 7 * 86_400


@schema_router.get("/api/schema/runner.json")
async def runner_json_schema() -> RunnerSchemaOut:
    """The JSON Schema of the runner protocol: the request agentcron POSTs per turn and the
    two answer forms (a JSON body, or the data of each Server-Sent Event by its name).
    """
    return RunnerSchemaOut.model_validate(runner_schema())


class RunnerApproval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn_id: str = Field(
        min_length=1, max_length=_MAX_ID, description="the request's `turn_id` (`webhook-id`)"
    )
    tool: NameText = Field(description="the tool the agent wants to call")
    args: dict[str, Any] = Field(default_factory=dict, description="its arguments, as shown")
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=_MAX_WAIT_S,
        description="how long to wait for a person (default: the approval timeout)",
    )


@router.post("/api/runner/approvals", responses=answers(401, 404, 422, *BODY))
async def ask_approval(body: RunnerApproval, cron: Cron, request: Request) -> RunnerApprovalOut:
    """Ask a person to approve a tool call of a running turn, and wait for the decision (the
    turn gives its slot back meanwhile and its timeout stops). Authorized by the runner
    secret as the bearer token; 404 when no turn of that id waits on its runner here.
    """
    runner = cron.http_runner
    given = bearer(request)
    if runner is None or not runner.secret or not token_matches(given, runner.secret):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="send 'Authorization: Bearer <runner secret>' (`agentcron token --runner`)"
            if runner is not None
            else "no runner URL is set: turns run on the built-in agent",
            headers={"WWW-Authenticate": "Bearer"},
        )
    wait = None if body.timeout_s is None else timedelta(seconds=body.timeout_s)
    approval = await runner.ask(turn_id=body.turn_id, tool=body.tool, args=body.args, wait=wait)
    if approval is None:
        return RunnerApprovalOut(approved=False, message=NO_ONE_TO_ASK, approval=None)
    message = denial_text(approval)
    return RunnerApprovalOut(
        approved=message is None, message=message, approval=ApprovalOut.of(approval)
    )
