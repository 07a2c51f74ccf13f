"""The inbound hook: an external service submits a message to a session, as a hook turn."""

from __future__ import annotations

from fastapi import APIRouter, Depends, status
from pydantic import BaseModel, ConfigDict, Field

from agentcron.agent.runner import TurnSource
from agentcron.limits import MessageText
from agentcron.server.auth import require_hook_token
from agentcron.server.deps import Cron
from agentcron.server.errors import BODY, answers
from agentcron.session_keys import SessionKey
from agentcron.views import HookOut

# Its own token (401), or off without one (404).
router = APIRouter(
    tags=["hooks"],
    dependencies=[Depends(require_hook_token)],
    responses=answers(401, 404, 422, *BODY),
)


class HookMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_key: SessionKey = Field(description="created (in UTC) if new")
    content: MessageText


@router.post("/hooks/agent", status_code=status.HTTP_202_ACCEPTED)
async def hook_message(body: HookMessage, cron: Cron) -> HookOut:
    """Like a chat message: queued behind any turn in progress, answered in the session (a new
    session is named after its first message).
    """
    turn = await cron.sessions.send(body.session_key, body.content, source=TurnSource.HOOK)
    return HookOut(turn_id=turn.id, session_key=body.session_key)
