"""The relay's arms, on agentcron's own store and engine.

An arm is an unbound one-shot job of the relay's AgentCron (`arm:{agent}:{job_id}`, an `at`
spec at the arm's `fire_at`, `delete_after_run`), whose message is the arm as JSON. Its fire is
an isolated run (no session, no target: nothing is delivered anywhere but the callback), and
the relay's runner is `Relay.deliver`: it POSTs `{callback_url}/api/cron/fire` with a fresh
fire token per attempt and retries (backoff 0.5 s doubling to 30 s) until a 2xx or the
delivery deadline. So the relay gets the engine's guarantees for free: durable arms, a claim
per fire (at most once across relay replicas sharing a database), catch-up of arms that came
due while it was down (`catchup=latest` inside 24 h), and a run record per fire that keeps
its delivery attempts. A 2xx, or the deadline, ends the arm (the one-shot is deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from agentcron.agent.runner import Outcome, Trigger
from agentcron.app import AgentCron
from agentcron.relay.agents import Agent
from agentcron.relay.keys import SigningKeys
from agentcron.schedule import AtSpec
from agentcron.store.errors import JobNotFoundError
from agentcron.store.models import Catchup, CreatedBy, Job, JobKind

log = logging.getLogger(__name__)

PREFIX = "arm:"
DEFAULT_DEADLINE = 3600.0
_FIRST_RETRY, _MAX_RETRY = 0.5, 30.0
_ATTEMPT_TIMEOUT = 10.0
_SOON = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class ArmView:
    """An arm as `GET /list` shows it."""

    job_id: str
    fire_at: str
    callback_url: str
    schedule_id: str

    def json(self) -> dict[str, str]:
        return {
            "job_id": self.job_id,
            "fire_at": self.fire_at,
            "callback_url": self.callback_url,
            "schedule_id": self.schedule_id,
        }


def arm_name(agent: str, job_id: str) -> str:
    return f"{PREFIX}{agent}:{job_id}"


def _payload(job: Job) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(job.message)
    return data


class Relay:
    """Provision, cancel and list arms per agent; deliver their fires."""

    def __init__(
        self,
        keys: SigningKeys,
        *,
        issuer: str,
        deadline: float = DEFAULT_DEADLINE,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        self.deadline = deadline
        self.cron: AgentCron | None = None  # set by the server once built (it needs `deliver`)
        self._transport = transport
        self._lock = asyncio.Lock()
        self.attempts: Counter[str] = Counter()
        self.deliveries: Counter[str] = Counter()

    def _cron(self) -> AgentCron:
        if self.cron is None:
            raise RuntimeError("the relay has no AgentCron yet")
        return self.cron

    async def _arms_of(self, agent: str, job_id: str | None = None) -> list[Job]:
        prefix = arm_name(agent, job_id) if job_id else f"{PREFIX}{agent}:"
        jobs = await self._cron().store.list_jobs(kind=JobKind.AGENT_TURN)
        if job_id:
            return [j for j in jobs if j.name == prefix]
        return [j for j in jobs if j.name.startswith(prefix)]

    async def provision(
        self, agent: Agent, job_id: str, fire_at: datetime, callback_url: str
    ) -> str:
        """Arm `job_id` of `agent` at `fire_at`: idempotent for the same fire, a new fire_at
        (or callback) replaces the old arm. Returns the arm's schedule id.
        """
        cron = self._cron()
        wire = fire_at.astimezone(UTC).isoformat(timespec="seconds")
        async with self._lock:
            existing = await self._arms_of(agent.name, job_id)
            for job in existing:
                data = _payload(job)
                if data.get("fire_at") == wire and data.get("callback_url") == callback_url:
                    return job.id  # the same fire (armed, or being delivered now)
            for job in existing:
                await self._delete(job.id)
            payload = {
                "agent": agent.name,
                "audience": agent.audience,
                "job_id": job_id,
                "fire_at": wire,
                "callback_url": callback_url,
            }
            # An arm whose time has passed (the agent was late to arm it) fires at once.
            at = max(fire_at, cron.clock.now() + _SOON)
            job = await cron.jobs.create(
                name=arm_name(agent.name, job_id),
                spec=AtSpec(at=at),
                message=json.dumps(payload),
                kind=JobKind.AGENT_TURN,
                created_by=CreatedBy.API,
                catchup=Catchup.LATEST,
                max_failures=0,  # a failed delivery ends the arm; never auto-pause
                delete_after_run=True,
            )
            log.info("armed %s at %s", job.name, wire)
            return job.id

    async def cancel(self, agent: Agent, job_id: str) -> bool:
        """Cancel the arm of `job_id` (True if there was one; unknown is no error)."""
        async with self._lock:
            found = await self._arms_of(agent.name, job_id)
            for job in found:
                await self._delete(job.id)
            return bool(found)

    async def _delete(self, arm_id: str) -> None:
        with contextlib.suppress(JobNotFoundError):  # fired and ended meanwhile
            await self._cron().jobs.delete(arm_id)

    async def list(self, agent: Agent) -> list[ArmView]:
        views = []
        # Arms waiting for their time and arms being delivered now (an arm ends, and its job
        # goes, with its delivery's last attempt).
        for job in await self._arms_of(agent.name):
            data = _payload(job)
            views.append(ArmView(data["job_id"], data["fire_at"], data["callback_url"], job.id))
        return views

    async def recover(self) -> int:
        """At start, after the engine reaped the fires of a relay that died: an arm whose
        delivery was cut (its job fired, no run of it still active) is armed again at once.
        Delivering twice is safe, the agent's claim runs a fire once; losing it is not.
        """
        cron = self._cron()
        again = 0
        async with self._lock:
            jobs = await cron.store.list_jobs(kind=JobKind.AGENT_TURN)
            for job in jobs:
                if not job.name.startswith(PREFIX) or job.next_fire_at is not None:
                    continue
                runs = await cron.store.list_runs(job_id=job.id, limit=5)
                if any(not r.state.terminal for r in runs):
                    continue  # adopted: still being delivered
                await self._delete(job.id)
                await cron.jobs.create(
                    name=job.name,
                    spec=AtSpec(at=cron.clock.now() + _SOON),
                    message=job.message,
                    kind=JobKind.AGENT_TURN,
                    created_by=CreatedBy.API,
                    catchup=Catchup.LATEST,
                    max_failures=0,
                    delete_after_run=True,
                )
                again += 1
        if again:
            log.warning("re-armed %d arm(s) whose delivery a stop cut short", again)
        return again

    # -- delivery ---------------------------------------------------------------------------

    async def deliver(self, trigger: Trigger) -> Outcome:
        """The relay's runner: POST the fire to the agent until a 2xx or the deadline. Every
        attempt is logged, counted, and listed in the run's result (or error).
        """
        data = json.loads(trigger.message)
        url = f"{str(data['callback_url']).rstrip('/')}/api/cron/fire"
        body = {"job_id": data["job_id"], "fire_at": data["fire_at"]}
        give_up = time.monotonic() + self.deadline
        delay = _FIRST_RETRY
        attempts: list[str] = []
        async with httpx.AsyncClient(transport=self._transport) as client:
            while True:
                token = self.keys.mint(
                    audience=data["audience"],
                    issuer=self.issuer,
                    job_id=data["job_id"],
                    fire_at=data["fire_at"],
                )
                started = datetime.now(UTC).isoformat(timespec="milliseconds")
                try:
                    response = await client.post(
                        url,
                        json=body,
                        headers={"Authorization": f"Bearer {token}"},
                        timeout=_ATTEMPT_TIMEOUT,
                    )
                    result = str(response.status_code)
                    delivered = 200 <= response.status_code < 300
                except httpx.HTTPError as exc:
                    result, delivered = type(exc).__name__, False
                attempts.append(f"{started} {result}")
                self.attempts["delivered" if delivered else "failed"] += 1
                log.info(
                    "fire delivery attempt %d for %s:%s -> %s",
                    len(attempts), data["agent"], data["job_id"], result,
                )  # fmt: skip
                if delivered:
                    self.deliveries["delivered"] += 1
                    return Outcome.succeeded(
                        f"delivered after {len(attempts)} attempt(s): " + "; ".join(attempts)
                    )
                if time.monotonic() + delay > give_up:
                    self.deliveries["gave_up"] += 1
                    return Outcome.failed(
                        f"not delivered before the deadline ({self.deadline:.0f}s), "
                        f"{len(attempts)} attempt(s): " + "; ".join(attempts[-20:])
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY)
