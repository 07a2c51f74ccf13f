"""The inbound hook: an external service submits a message to a session, as a hook turn."""

from __future__ import annotations

from typing import Self

from fastapi import APIRouter, Depends, status
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcron.agent.runner import TurnSource
from agentcron.domain.attachments import Attachment, AttachmentKind, decode_data
from agentcron.limits import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENT_URL_CHARS,
    MAX_ATTACHMENTS,
    MessageText,
    ShortText,
)
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


class HookAttachment(BaseModel):
    """A file sent with the message: by `url`, or its bytes as base64 `data` (one of them)."""

    model_config = ConfigDict(extra="forbid")

    kind: AttachmentKind = "document"
    name: ShortText | None = None
    mime_type: ShortText | None = None
    url: str | None = Field(None, max_length=MAX_ATTACHMENT_URL_CHARS, description="http(s)")
    data: str | None = Field(
        None,
        max_length=(MAX_ATTACHMENT_BYTES + 2) // 3 * 4,
        description=f"the bytes, base64 (at most {MAX_ATTACHMENT_BYTES} bytes)",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.url is None) == (self.data is None):
            raise ValueError("an attachment has either a url or data (base64)")
        return self

    def attachment(self) -> Attachment:
        """As the turn gets it (InvalidInputError, a 422, for a bad url or base64)."""
        data = None if self.data is None else decode_data(self.data)
        return Attachment(
            self.kind,
            self.name,
            self.mime_type,
            len(data) if data is not None else None,
            url=self.url,
            data=data,
        )


class HookMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_key: SessionKey = Field(description="created (in UTC) if new")
    content: MessageText
    attachments: list[HookAttachment] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)


@router.post("/hooks/agent", status_code=status.HTTP_202_ACCEPTED)
async def hook_message(body: HookMessage, cron: Cron) -> HookOut:
    """Like a chat message: queued behind any turn in progress, answered in the session (a new
    session is named after its first message). Its `attachments` reach the turn's runner; the
    transcript keeps what they were, never their bytes.
    """
    files = [a.attachment() for a in body.attachments]
    turn = await cron.sessions.send(
        body.session_key, body.content, source=TurnSource.HOOK, attachments=files
    )
    return HookOut(turn_id=turn.id, session_key=body.session_key)
