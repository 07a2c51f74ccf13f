"""A job's trigger: turn it on, rotate or turn off its secret (API token), and the events
posted to it (`POST /hooks/jobs/{job_id}`: outside the API token, the Standard Webhooks
signature made with the job's own secret is the auth).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse

from agentcron.limits import MAX_EVENT_BYTES
from agentcron.server.deps import Cron, Id
from agentcron.server.errors import answers
from agentcron.views import EventOut, TriggerOut

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
event_router = APIRouter(tags=["hooks"])


def _base(request: Request) -> str:
    return str(request.base_url)


@router.post("/{job_id}/trigger", status_code=status.HTTP_201_CREATED, responses=answers(404, 409))
async def enable_trigger(job_id: Id, cron: Cron, request: Request) -> TriggerOut:
    """Turn the job's trigger on: its URL and a new secret, shown this once (409: it is on
    already, rotate it; or the job is not an automation).
    """
    return TriggerOut.of_key(await cron.triggers.enable(job_id), _base(request))


@router.post("/{job_id}/trigger/rotate", responses=answers(404, 409))
async def rotate_trigger(job_id: Id, cron: Cron, request: Request) -> TriggerOut:
    """A new secret, shown this once; the old one is refused from now on (409: it is off)."""
    return TriggerOut.of_key(await cron.triggers.rotate(job_id), _base(request))


@router.delete("/{job_id}/trigger", responses=answers(404, 409))
async def disable_trigger(job_id: Id, cron: Cron, request: Request) -> TriggerOut:
    """Turn the job's trigger off: its secret is forgotten, events get 404."""
    job = await cron.triggers.disable(job_id)
    path = f"/hooks/jobs/{job.id}"
    return TriggerOut(
        job_id=job.id, enabled=False, path=path, url=_base(request).rstrip("/") + path, secret=None
    )


_SIGNED = {
    "webhook-id": "the event's id: a second delivery of it fires nothing (answer 200, the "
    "first delivery's run)",
    "webhook-timestamp": "seconds since the epoch; more than 5 minutes off this server's "
    "clock is refused (400)",
    "webhook-signature": "v1,<base64 HMAC-SHA256 of id.timestamp.body> with the job's "
    "trigger secret (Standard Webhooks); space-separated for several",
}


@event_router.post(
    "/hooks/jobs/{job_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=EventOut,
    responses={
        200: {"model": EventOut, "description": "a repeated event id: the first run, no new one"},
        **answers(400, 401, 404, 409, 413, 422),
    },
    openapi_extra={
        "parameters": [
            {
                "name": h,
                "in": "header",
                "required": True,
                "schema": {"type": "string"},
                "description": d,
            }
            for h, d in _SIGNED.items()
        ],
        "requestBody": {
            "required": True,
            "description": f"the event: any JSON, at most {MAX_EVENT_BYTES} bytes; the "
            "prompt gets it as it is",
            "content": {"application/json": {"schema": {}}},
        },
    },
)
async def post_event(job_id: Id, cron: Cron, request: Request) -> JSONResponse:
    """An event for the job, signed with its trigger secret: runs it once, through the same
    path as a "run now" (deferred behind an open turn of its session as usual); the prompt
    gets the event's JSON. 404 alike for no such job and a trigger that is off; 409: the job
    is paused.
    """
    body = await request.body()
    accepted = await cron.triggers.deliver(job_id, request.headers, body)
    out = EventOut.of_event(accepted)
    return JSONResponse(out.json_dict(), status_code=200 if accepted.duplicate else 202)
