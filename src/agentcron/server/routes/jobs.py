"""Jobs ("automations"): create from `when`, list, read with upcoming fires, change, remove."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field

from agentcron.schedule import upcoming
from agentcron.server.deps import Cron
from agentcron.server.routes.sessions import jobs_with_state
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.models import Catchup, JobKind, Overlap
from agentcron.views import iso, job_view, run_view

router = APIRouter(prefix="/api/jobs", tags=["jobs"])

_WHEN_HELP = (
    'anything parse_when reads: "in 30m", "tomorrow at 9", "every weekday at 9", '
    '"every 2h", a cron expression such as "0 9 * * 1-5"'
)


_MODEL_HELP = (
    'the model its turns run on, "provider:name" (e.g. "openai:gpt-4o") or "offline"; '
    "null (on update) = the default model"
)


class JobCreate(BaseModel):
    session_key: str = Field(description="the session the automation belongs to")
    name: str = Field(min_length=1, max_length=200)
    message: str = Field(min_length=1, description="what the agent should do when it fires")
    when: str = Field(min_length=1, description=_WHEN_HELP)
    tz: str | None = Field(default=None, description="IANA zone; default: the session's zone")
    overlap: Overlap = Overlap.BUFFER_ONE
    catchup: Catchup = Catchup.LATEST
    max_runs: int | None = Field(default=None, ge=1)
    end_at: datetime | None = None
    idempotency_key: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, max_length=200, description=_MODEL_HELP)


class JobPatch(BaseModel):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    message: str | None = Field(default=None, min_length=1)
    when: str | None = Field(default=None, min_length=1, description=_WHEN_HELP)
    tz: str | None = None
    overlap: Overlap | None = None
    catchup: Catchup | None = None
    max_runs: int | None = Field(default=None, ge=1)
    end_at: datetime | None = None
    enabled: bool | None = Field(default=None, description="false pauses, true resumes")
    model: str | None = Field(default=None, max_length=200, description=_MODEL_HELP)


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"{field} needs a UTC offset, e.g. 2026-12-31T18:00:00+01:00",
        )
    return value


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_job(body: JobCreate, cron: Cron) -> dict[str, Any]:
    try:
        session = await cron.sessions.get(body.session_key)
    except SessionNotFoundError as exc:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"no session {body.session_key!r}: create it first with POST /api/sessions",
        ) from exc
    owner = cron.automation_owner(session.key)
    if owner != session.key:
        await cron.sessions.create(owner, title="Shared automations (unified mode)")
    job = await cron.jobs.create(
        name=body.name,
        when=body.when,
        tz=body.tz or session.tz,
        message=body.message,
        session_key=owner,
        overlap=body.overlap,
        catchup=body.catchup,
        max_runs=body.max_runs,
        end_at=_aware(body.end_at, "end_at"),
        idempotency_key=body.idempotency_key,
        model=body.model,
    )
    return job_view(job)


@router.get("")
async def list_jobs(
    cron: Cron,
    session_key: str | None = Query(default=None, description="a chat's automations and recall"),
    kind: JobKind | None = None,
    enabled: bool | None = None,
    limit: int | None = Query(default=None, ge=1, le=100_000),
) -> dict[str, Any]:
    if session_key is not None:
        jobs = [
            j
            for j in await cron.jobs.for_session(session_key)
            if (kind is None or j.kind is kind) and (enabled is None or j.enabled is enabled)
        ][:limit]
    else:
        jobs = await cron.jobs.list(kind=kind, enabled=enabled, limit=limit)
    return {"jobs": await jobs_with_state(cron, jobs)}


@router.get("/{job_id}")
async def get_job(job_id: str, cron: Cron) -> dict[str, Any]:
    job = await cron.jobs.get(job_id)
    (view,) = await jobs_with_state(cron, [job])
    nxt = job.next_fire_at
    fires = [] if nxt is None else [nxt, *upcoming(job.spec, nxt, 4)]
    runs = await cron.runs.list(job.id, limit=10)
    return {
        **view,
        "upcoming": [iso(f) for f in fires],
        "runs": [run_view(r) for r in runs],
        "usage": await cron.jobs.usage(job.id),
    }


@router.patch("/{job_id}")
async def update_job(job_id: str, body: JobPatch, cron: Cron) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True, exclude={"enabled"})
    if "end_at" in changes:
        _aware(changes["end_at"], "end_at")
    policy = {
        k: changes.pop(k) for k in ("overlap", "catchup", "max_runs", "end_at") if k in changes
    }
    job = await cron.jobs.get(job_id)
    if changes or policy:
        job = await cron.jobs.update(job_id, **changes, **policy)
    if body.enabled is False and job.enabled:
        job = await cron.jobs.pause(job_id)
    elif body.enabled is True and not job.enabled:
        job = await cron.jobs.resume(job_id)
    (view,) = await jobs_with_state(cron, [job])
    return view


@router.post("/{job_id}/pause")
async def pause_job(job_id: str, cron: Cron) -> dict[str, Any]:
    return job_view(await cron.jobs.pause(job_id))


@router.post("/{job_id}/resume")
async def resume_job(job_id: str, cron: Cron) -> dict[str, Any]:
    return job_view(await cron.jobs.resume(job_id))


@router.delete("/{job_id}")
async def delete_job(job_id: str, cron: Cron) -> dict[str, Any]:
    job = await cron.jobs.delete(job_id)
    return {"deleted": job.id}


@router.get("/{job_id}/runs")
async def job_runs(
    job_id: str, cron: Cron, limit: int = Query(default=50, ge=1, le=1000)
) -> dict[str, Any]:
    await cron.jobs.get(job_id)
    return {"runs": [run_view(r) for r in await cron.runs.list(job_id, limit=limit)]}
