"""Jobs ("automations"): create from `when`, list, read with upcoming fires, change, remove."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, status

from agentcron.server.deps import Cron
from agentcron.service import jobs as service
from agentcron.service.jobs import JobCreate, JobPatch
from agentcron.store.models import JobKind

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_job(body: JobCreate, cron: Cron) -> dict[str, Any]:
    return await service.create_job(cron, body)


@router.get("")
async def list_jobs(
    cron: Cron,
    session_key: str | None = Query(default=None, description="a chat's automations and recall"),
    kind: JobKind | None = None,
    enabled: bool | None = None,
    limit: int | None = Query(default=None, ge=1, le=100_000),
) -> dict[str, Any]:
    return await service.list_jobs(
        cron, session_key=session_key, kind=kind, enabled=enabled, limit=limit
    )


@router.get("/{job_id}")
async def get_job(job_id: str, cron: Cron) -> dict[str, Any]:
    return await service.get_job(cron, job_id)


@router.patch("/{job_id}")
async def update_job(job_id: str, body: JobPatch, cron: Cron) -> dict[str, Any]:
    return await service.update_job(cron, job_id, body)


@router.post("/{job_id}/pause")
async def pause_job(job_id: str, cron: Cron) -> dict[str, Any]:
    return await service.pause_job(cron, job_id)


@router.post("/{job_id}/resume")
async def resume_job(job_id: str, cron: Cron) -> dict[str, Any]:
    return await service.resume_job(cron, job_id)


@router.delete("/{job_id}")
async def delete_job(job_id: str, cron: Cron) -> dict[str, Any]:
    return await service.delete_job(cron, job_id)


@router.get("/{job_id}/runs")
async def job_runs(
    job_id: str, cron: Cron, limit: int = Query(default=50, ge=1, le=1000)
) -> dict[str, Any]:
    return await service.job_runs(cron, job_id, limit=limit)
