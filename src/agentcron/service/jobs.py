"""Jobs ("automations"): create from `when`, list with their state, read, change, remove."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentcron.errors import InvalidInputError
from agentcron.schedule import upcoming
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.models import ACTIVE_STATES, Catchup, Job, JobKind, Overlap, Run
from agentcron.views import iso, job_view, run_view

if TYPE_CHECKING:
    from agentcron.app import AgentCron

WHEN_HELP = (
    'anything parse_when reads: "in 30m", "tomorrow at 9", "every weekday at 9", '
    '"every 2h", a cron expression such as "0 9 * * 1-5"'
)
MODEL_HELP = (
    'the model its turns run on, "provider:name" (e.g. "openai:gpt-4o") or "offline"; '
    "null (on update) = the default model"
)


class JobCreate(BaseModel):
    session_key: str = Field(description="the session the automation belongs to")
    name: str = Field(min_length=1, max_length=200)
    message: str = Field(min_length=1, description="what the agent should do when it fires")
    when: str = Field(min_length=1, description=WHEN_HELP)
    tz: str | None = Field(default=None, description="IANA zone; default: the session's zone")
    overlap: Overlap = Overlap.BUFFER_ONE
    catchup: Catchup = Catchup.LATEST
    max_runs: int | None = Field(default=None, ge=1)
    end_at: datetime | None = None
    idempotency_key: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, max_length=200, description=MODEL_HELP)


class JobPatch(BaseModel):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    message: str | None = Field(default=None, min_length=1)
    when: str | None = Field(default=None, min_length=1, description=WHEN_HELP)
    tz: str | None = None
    overlap: Overlap | None = None
    catchup: Catchup | None = None
    max_runs: int | None = Field(default=None, ge=1)
    end_at: datetime | None = None
    enabled: bool | None = Field(default=None, description="false pauses, true resumes")
    model: str | None = Field(default=None, max_length=200, description=MODEL_HELP)


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidInputError(f"{field} needs a UTC offset, e.g. 2026-12-31T18:00:00+01:00")
    return value


async def _active_runs(cron: AgentCron, jobs: Sequence[Job]) -> dict[str, Run]:
    if not jobs:
        return {}
    active = await cron.runs.list(states=sorted(ACTIVE_STATES), limit=None)
    ids = {j.id for j in jobs}
    found: dict[str, Run] = {}
    for run in sorted(active, key=lambda r: r.fire_at):
        if run.job_id in ids:
            found.setdefault(run.job_id, run)
    return found


async def jobs_with_state(cron: AgentCron, jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """Jobs as the API shows them, each with the run it has in progress (if any)."""
    active = await _active_runs(cron, jobs)
    return [job_view(j, active_run=active.get(j.id)) for j in jobs]


async def create_job(cron: AgentCron, body: JobCreate) -> dict[str, Any]:
    """An automation of an existing session (in unified mode: of the shared session)."""
    try:
        session = await cron.sessions.get(body.session_key)
    except SessionNotFoundError as exc:
        raise SessionNotFoundError(
            body.session_key,
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


async def list_jobs(
    cron: AgentCron,
    *,
    session_key: str | None = None,
    kind: JobKind | None = None,
    enabled: bool | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Jobs, or a session's (what that chat shows: its own, and in unified mode the shared)."""
    if session_key is not None:
        jobs = [
            j
            for j in await cron.jobs.for_session(session_key)
            if (kind is None or j.kind is kind) and (enabled is None or j.enabled is enabled)
        ][:limit]
    else:
        jobs = await cron.jobs.list(kind=kind, enabled=enabled, limit=limit)
    return {"jobs": await jobs_with_state(cron, jobs)}


async def get_job(cron: AgentCron, job_id: str) -> dict[str, Any]:
    """A job with its next 5 fire times, its last 10 runs and what it cost."""
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


async def update_job(cron: AgentCron, job_id: str, body: JobPatch) -> dict[str, Any]:
    """Change what is given; `enabled` pauses or resumes."""
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


async def pause_job(cron: AgentCron, job_id: str) -> dict[str, Any]:
    return job_view(await cron.jobs.pause(job_id))


async def resume_job(cron: AgentCron, job_id: str) -> dict[str, Any]:
    return job_view(await cron.jobs.resume(job_id))


async def delete_job(cron: AgentCron, job_id: str) -> dict[str, Any]:
    job = await cron.jobs.delete(job_id)
    return {"deleted": job.id}


async def job_runs(cron: AgentCron, job_id: str, *, limit: int = 50) -> dict[str, Any]:
    await cron.jobs.get(job_id)
    return {"runs": [run_view(r) for r in await cron.runs.list(job_id, limit=limit)]}
