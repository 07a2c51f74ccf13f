"""Jobs ("automations"): create from `when`, list, read with upcoming fires, change, remove."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, status

from agentcron import views
from agentcron.domain.jobs import JobKind
from agentcron.server.deps import Cron, Id
from agentcron.service.job_requests import JobCreate, JobPatch
from agentcron.session_keys import MAX_SESSION_KEY

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_job(body: JobCreate, cron: Cron) -> dict[str, Any]:
    """A job of an existing session (in unified mode, web chats' jobs bind to the shared one)."""
    return views.job_view(await cron.jobs.create_in_session(body))


@router.get("")
async def list_jobs(
    cron: Cron,
    session_key: str | None = Query(
        default=None, max_length=MAX_SESSION_KEY, description="a chat's automations and recall"
    ),
    kind: JobKind | None = None,
    enabled: bool | None = None,
    limit: int | None = Query(default=None, ge=1, le=100_000),
) -> dict[str, Any]:
    """Jobs with their state, or a chat's (its own and, in unified mode, the shared ones)."""
    states = await cron.jobs.listing(
        session_key=session_key, kind=kind, enabled=enabled, limit=limit
    )
    return views.jobs_answer(states)


@router.get("/{job_id}")
async def get_job(job_id: Id, cron: Cron) -> dict[str, Any]:
    """A job with its next 5 fire times, its last 10 runs and what it cost."""
    return views.job_detail_view(await cron.jobs.detail(job_id))


@router.patch("/{job_id}")
async def update_job(job_id: Id, body: JobPatch, cron: Cron) -> dict[str, Any]:
    """Change what is given; `enabled` pauses or resumes."""
    return views.job_state_view(await cron.jobs.apply_patch(job_id, body))


@router.post("/{job_id}/pause")
async def pause_job(job_id: Id, cron: Cron) -> dict[str, Any]:
    return views.job_view(await cron.jobs.pause(job_id))


@router.post("/{job_id}/resume")
async def resume_job(job_id: Id, cron: Cron) -> dict[str, Any]:
    return views.job_view(await cron.jobs.resume(job_id))


@router.delete("/{job_id}")
async def delete_job(job_id: Id, cron: Cron) -> dict[str, Any]:
    return {"deleted": (await cron.jobs.delete(job_id)).id}


@router.get("/{job_id}/runs")
async def job_runs(
    job_id: Id, cron: Cron, limit: int = Query(default=50, ge=1, le=1000)
) -> dict[str, Any]:
    return views.runs_answer(await cron.jobs.runs_of(job_id, limit=limit))
