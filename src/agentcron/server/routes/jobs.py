"""Jobs ("automations"): create from `when`, list, read with upcoming fires, change, remove."""

from __future__ import annotations

from fastapi import APIRouter, Query, status

from agentcron.domain.jobs import JobKind
from agentcron.server.deps import Cron, Cursor, Id, Limit
from agentcron.server.errors import BODY, CHANGE, answers
from agentcron.service.job_requests import GrantCreate, JobCreate, JobPatch, JobRenew
from agentcron.service.paging import DEFAULT_PAGE
from agentcron.session_keys import MAX_SESSION_KEY
from agentcron.views import (
    DeletedJobOut,
    GrantOut,
    GrantsOut,
    JobDetailOut,
    JobOut,
    JobsOut,
    JobSpendOut,
    RevokedGrantOut,
    RunOut,
    RunsOut,
)

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


@router.post("", status_code=status.HTTP_201_CREATED, responses=answers(*CHANGE))
async def create_job(body: JobCreate, cron: Cron) -> JobOut:
    """A job of an existing session (in unified mode, web chats' jobs bind to the shared one)."""
    return JobOut.of_job(await cron.jobs.create_in_session(body))


@router.get("")
async def list_jobs(
    cron: Cron,
    session_key: str | None = Query(
        default=None, max_length=MAX_SESSION_KEY, description="a chat's automations and recall"
    ),
    kind: JobKind | None = None,
    enabled: bool | None = None,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
) -> JobsOut:
    """Jobs with their state, or a chat's (its own and, in unified mode, the shared ones),
    oldest first; `next_cursor` is null on the last page.
    """
    page = await cron.jobs.page(
        session_key=session_key, kind=kind, enabled=enabled, limit=limit, cursor=cursor
    )
    return JobsOut.of_page(page)


@router.get("/{job_id}", responses=answers(404))
async def get_job(job_id: Id, cron: Cron) -> JobDetailOut:
    """A job with its next 5 fire times, its last 10 runs and what it cost."""
    return JobDetailOut.of_detail(await cron.jobs.detail(job_id))


# A system job (heartbeat, dream) cannot be changed or removed here: 403.
@router.patch("/{job_id}", responses=answers(404, 403, *CHANGE))
async def update_job(job_id: Id, body: JobPatch, cron: Cron) -> JobOut:
    """Change what is given; `enabled` pauses or resumes."""
    return JobOut.of_state(await cron.jobs.apply_patch(job_id, body))


@router.post("/{job_id}/pause", responses=answers(404, 403, *CHANGE))
async def pause_job(job_id: Id, cron: Cron) -> JobOut:
    return JobOut.of_job(await cron.jobs.pause(job_id))


@router.post("/{job_id}/resume", responses=answers(404, 403, *CHANGE))
async def resume_job(job_id: Id, cron: Cron) -> JobOut:
    return JobOut.of_job(await cron.jobs.resume(job_id))


@router.post("/{job_id}/renew", responses=answers(404, 403, *CHANGE))
async def renew_job(job_id: Id, body: JobRenew, cron: Cron) -> JobOut:
    """A job that ends (`end_at`, `max_runs`) or ended: a later end and/or more runs; a done
    job is armed again.
    """
    return JobOut.of_state(await cron.jobs.apply_renew(job_id, body))


@router.delete("/{job_id}", responses=answers(404, 403, 409))
async def delete_job(job_id: Id, cron: Cron) -> DeletedJobOut:
    return DeletedJobOut(deleted=(await cron.jobs.delete(job_id)).id)


@router.get("/{job_id}/spend", responses=answers(404))
async def job_spend(
    job_id: Id,
    cron: Cron,
    days: int = Query(default=30, ge=1, le=366, description="UTC days back, today included"),
) -> JobSpendOut:
    """The job's spend against its budget: its caps, what it spent today and this month
    (UTC) with the estimate of one run, and its tokens and cost per UTC day.
    """
    return JobSpendOut.of_spend(await cron.jobs.spend(job_id, days))


@router.get("/{job_id}/runs", responses=answers(404))
async def job_runs(
    job_id: Id, cron: Cron, limit: Limit = DEFAULT_PAGE, cursor: Cursor = None
) -> RunsOut:
    """The job's runs, newest first (a deleted job's too, while they are kept)."""
    return RunsOut.of_page(await cron.runs.page(job_id=job_id, limit=limit, cursor=cursor))


# A paused job runs too: "run now" is a person's explicit request. 409: its previous manual run
# has not ended yet.
@router.post("/{job_id}/run", status_code=status.HTTP_202_ACCEPTED, responses=answers(404, 409))
async def run_job(job_id: Id, cron: Cron) -> RunOut:
    """Run the job now, once (a manual run; its schedule does not move): the run, not started."""
    return RunOut.of(await cron.runs.run_now(job_id))


# Standing approvals: a person's (the API token's), never the agent's tools.
@router.get("/{job_id}/grants", responses=answers(404))
async def list_grants(job_id: Id, cron: Cron) -> GrantsOut:
    """The job's standing approvals, oldest first (expired ones too, until revoked)."""
    return GrantsOut.of_grants(await cron.approvals.grants(job_id), cron.clock.now())


@router.post("/{job_id}/grants", status_code=status.HTTP_201_CREATED, responses=answers(404, *BODY))
async def create_grant(job_id: Id, body: GrantCreate, cron: Cron) -> GrantOut:
    """A standing approval: the job's scheduled runs may call `tool` with arguments matching
    `args` without waiting for a person, until it expires.
    """
    return GrantOut.of_grant(await cron.approvals.grant_request(job_id, body), cron.clock.now())


@router.delete("/{job_id}/grants/{grant_id}", responses=answers(404))
async def revoke_grant(job_id: Id, grant_id: Id, cron: Cron) -> RevokedGrantOut:
    """Revoke a grant: the calls it allowed wait for a person again."""
    return RevokedGrantOut(revoked=(await cron.approvals.revoke(job_id, grant_id)).id)
