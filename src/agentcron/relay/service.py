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

Provision, cancel and the re-arm at start each change an agent's arms in one transaction
under that agent's database lock (`store/relay_arms.py`), so relay processes sharing one
database never interleave them. A callback URL must be of an origin the agent is allowed
and resolve to public addresses only (`relay/callbacks.py`), checked at provisioning and
again at delivery.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from agentcron.agent.runner import Outcome, Trigger
from agentcron.app import AgentCron
from agentcron.config.relay import DEFAULT_DEADLINE
from agentcron.domain.events import JobAction
from agentcron.domain.jobs import Catchup, CreatedBy, Job, JobKind, JobPolicy, NewJob
from agentcron.engine.policies import arm
from agentcron.limits import check_text
from agentcron.relay.agents import Agent
from agentcron.relay.callbacks import (
    CallbackGuard,
    CallbackRefusedError,
    InvalidCallbackError,
    check_origin,
    guarded_transport,
)
from agentcron.relay.signing_keys import SigningKeys
from agentcron.schedule import AtSpec
from agentcron.store.ids import new_id
from agentcron.store.interface import RelayArmLedger
from agentcron.store.relay_arms import ARM_PREFIX, arm_name, relay_arm_ledger
from agentcron.store.writes import ArmedJob

log = logging.getLogger(__name__)

PREFIX = ARM_PREFIX
_FIRST_RETRY, _MAX_RETRY = 0.5, 30.0
_ATTEMPT_TIMEOUT = 10.0
_SOON = timedelta(milliseconds=1)
# An arm: catch up the latest fire within a day; a failed delivery ends it (never auto-pause).
_ARM_POLICY = JobPolicy(catchup=Catchup.LATEST, max_failures=0, delete_after_run=True)

__all__ = ["DEFAULT_DEADLINE", "PREFIX", "ArmView", "Relay", "arm_name"]


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
        guard: CallbackGuard | None = None,
        agent_of: Callable[[str], Agent | None] | None = None,
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        self.deadline = deadline
        self.cron: AgentCron | None = None  # set by the server once built (it needs `deliver`)
        self._transport = transport  # None: the guarded transport (tests give their own)
        # The address rule; by default private callbacks are refused.
        self.guard = guard if guard is not None else CallbackGuard()
        # The agent as registered now, to check a callback's origin again at delivery (None:
        # no registry, e.g. a library user; the origin was checked at provisioning).
        self.agent_of = agent_of
        self._ledger_of: tuple[AgentCron, RelayArmLedger] | None = None
        self.attempts: Counter[str] = Counter()
        self.deliveries: Counter[str] = Counter()

    def _cron(self) -> AgentCron:
        if self.cron is None:
            raise RuntimeError("the relay has no AgentCron yet")
        return self.cron

    def _ledger(self) -> RelayArmLedger:
        cron = self._cron()
        if self._ledger_of is None or self._ledger_of[0] is not cron:
            self._ledger_of = (cron, relay_arm_ledger(cron.store))
        return self._ledger_of[1]

    def _armed(self, name: str, at: datetime, payload: dict[str, Any], now: datetime) -> ArmedJob:
        new = NewJob(
            name=check_text(name, "job_id"),
            spec=AtSpec(at=at),
            message=check_text(json.dumps(payload), "arm"),
            kind=JobKind.AGENT_TURN,
            created_by=CreatedBy.API,
            policy=_ARM_POLICY,
        )
        job_id = new_id()
        fire, due = arm(new.spec, new.policy, job_id, now)
        return ArmedJob(job_id, new, fire, due)

    async def _changed(self, removed: list[Job], created: Job | None) -> None:
        """After the transaction: tell the engine of a new fire, and the bus of the change."""
        cron = self._cron()
        for job in removed:
            await cron.publish_job(JobAction.DELETED, job)
        if created is not None:
            cron.engine.due_at(created.next_run_at)
            await cron.publish_job(JobAction.CREATED, created)

    async def provision(
        self, agent: Agent, job_id: str, fire_at: datetime, callback_url: str
    ) -> str:
        """Arm `job_id` of `agent` at `fire_at`: idempotent for the same fire, a new fire_at
        (or callback) replaces the old arm. Returns the arm's schedule id.

        CallbackRefusedError when the callback's origin is not one of the agent's or its host
        resolves to an address the relay does not call; InvalidCallbackError when it is no
        usable URL.
        """
        check_origin(callback_url, agent.name, agent.origins)
        await self.guard.check_url(callback_url)  # before the lock: DNS is network I/O
        cron = self._cron()
        wire = fire_at.astimezone(UTC).isoformat(timespec="seconds")
        payload = {
            "agent": agent.name,
            "audience": agent.audience,
            "job_id": job_id,
            "fire_at": wire,
            "callback_url": callback_url,
        }
        now = cron.clock.now()
        # An arm whose time has passed (the agent was late to arm it) fires at once.
        armed = self._armed(arm_name(agent.name, job_id), max(fire_at, now + _SOON), payload, now)

        def same(job: Job) -> bool:  # the same fire (armed, or being delivered now)
            data = _payload(job)
            return data.get("fire_at") == wire and data.get("callback_url") == callback_url

        change = await self._ledger().replace(agent.name, job_id, armed, now, same=same)
        if change.kept is not None:
            return change.kept.id
        await self._changed(change.removed, change.created)
        if change.created is None:  # pragma: no cover - replace inserts when armed is given
            raise RuntimeError("the arm was not stored")
        log.info("armed %s at %s", change.created.name, wire, extra={"job_id": change.created.id})
        return change.created.id

    async def cancel(self, agent: Agent, job_id: str) -> bool:
        """Cancel the arm of `job_id` (True if there was one; unknown is no error)."""
        change = await self._ledger().replace(agent.name, job_id, None, self._cron().clock.now())
        await self._changed(change.removed, None)
        return bool(change.removed)

    async def list(self, agent: Agent) -> list[ArmView]:
        views = []
        # Arms waiting for their time and arms being delivered now (an arm ends, and its job
        # goes, with its delivery's last attempt).
        for job in await self._ledger().arms(agent.name):
            data = _payload(job)
            views.append(ArmView(data["job_id"], data["fire_at"], data["callback_url"], job.id))
        return views

    async def recover(self) -> int:
        """At start, after the engine reaped the fires of a relay that died: an arm whose
        delivery was cut (its job fired, no run of it still active) is armed again at once.
        Delivering twice is safe, the agent's claim runs a fire once; losing it is not.
        """
        cron = self._cron()
        ledger = self._ledger()
        again = 0
        for job in await ledger.all_arms():
            if job.next_fire_at is not None:
                continue
            runs = await cron.store.list_runs(job_id=job.id, limit=5)
            if any(not r.state.terminal for r in runs):
                continue  # adopted: still being delivered
            agent = str(_payload(job).get("agent", ""))
            now = cron.clock.now()
            armed = self._armed(job.name, now + _SOON, _payload(job), now)
            # Checked again under the agent's lock: another relay may have re-armed it,
            # adopted its run, or the agent re-provisioned or cancelled it meanwhile.
            if await ledger.rearm_cut(agent, job.id, armed, now):
                cron.engine.due_at(armed.next_run_at)
                again += 1
        if again:
            log.warning("re-armed %d arm(s) whose delivery a stop cut short", again)
        return again

    # -- delivery ---------------------------------------------------------------------------

    def _origin_now(self, data: dict[str, Any]) -> None:
        """The callback's origin must still be allowed for the agent (an operator may have
        revoked it, or removed the agent, since it was armed).
        """
        if self.agent_of is None:
            return
        agent = self.agent_of(str(data["agent"]))
        if agent is None:
            raise CallbackRefusedError(f"agent {data['agent']!r} is no longer registered")
        check_origin(str(data["callback_url"]), agent.name, agent.origins)

    async def deliver(self, trigger: Trigger) -> Outcome:
        """The relay's runner: POST the fire to the agent until a 2xx or the deadline. Every
        attempt is logged, counted, and listed in the run's result (or error). A callback
        the relay may no longer call (origin revoked, a private address) ends it at once.
        """
        data = json.loads(trigger.message)
        url = f"{str(data['callback_url']).rstrip('/')}/api/cron/fire"
        body = {"job_id": data["job_id"], "fire_at": data["fire_at"]}
        ids = {"job_id": data["job_id"], "agent": data["agent"]}
        give_up = time.monotonic() + self.deadline
        delay = _FIRST_RETRY
        attempts: list[str] = []
        transport = self._transport or guarded_transport(self.guard)
        async with httpx.AsyncClient(transport=transport) as client:
            while True:
                token = self.keys.mint(
                    audience=data["audience"],
                    issuer=self.issuer,
                    job_id=data["job_id"],
                    fire_at=data["fire_at"],
                )
                started = datetime.now(UTC).isoformat(timespec="milliseconds")
                try:
                    self._origin_now(data)
                    # Resolved and checked again at every attempt (DNS can change); the
                    # guarded transport checks the addresses it connects to as well.
                    await self.guard.check_url(url)
                    response = await client.post(
                        url,
                        json=body,
                        headers={"Authorization": f"Bearer {token}"},
                        timeout=_ATTEMPT_TIMEOUT,
                    )
                    result = str(response.status_code)
                    delivered = 200 <= response.status_code < 300
                except CallbackRefusedError as exc:
                    self.attempts["refused"] += 1
                    self.deliveries["refused"] += 1
                    log.warning("fire delivery refused: %s", exc, extra=ids)
                    return Outcome.failed(
                        f"refused: {exc}; {len(attempts)} attempt(s) before: "
                        + "; ".join(attempts[-20:])
                    )
                except (httpx.HTTPError, InvalidCallbackError) as exc:
                    result, delivered = type(exc).__name__, False
                attempts.append(f"{started} {result}")
                self.attempts["delivered" if delivered else "failed"] += 1
                log.info(
                    "fire delivery attempt %d for %s:%s -> %s",
                    len(attempts), data["agent"], data["job_id"], result, extra=ids,
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
