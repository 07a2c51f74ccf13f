"""The wake provider: what makes the engine claim a fire.

- `LocalWake` (default): the engine's own timer sleeps until the next due fire.
- `ManagedWake`: no timer. The engine claims only when the wake service delivers a fire
  (`POST /api/cron/fire`, verified by a `verify.FireVerifier`), so the process can be stopped
  between fires. It keeps the service's arms (one per job: its next due time) equal to the
  jobs: `reconcile` arms missing or changed fires and cancels orphans. It runs at start,
  after every job event on the bus (every surface changes jobs through `service.Jobs`, which
  publishes a `JobEvent`; every fire's end publishes `settled`/`deleted` after the job's
  record is committed) and after each fire starts (the claim moved the job's next fire). A
  failed reconcile is retried with backoff while the process runs; nothing here ever wakes a
  stopped agent.

`resolve` picks the provider from `WakeSettings` (and the arm client and fire verifier from
`wake.service` / `wake.verifier`: the relay's or seed 002's, or the caller's own): `managed`
with missing settings, or whose verifier is not ready at start (its JWKS cannot be fetched),
runs on the local timer and says why (`status`, /readyz, /metrics); when the verifier becomes
ready later, it turns managed then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Protocol

from agentcron.config.wake import WakeSettings
from agentcron.domain.events import Callback, Event, FireStarted, JobAction, JobEvent
from agentcron.engine.scheduler import Engine
from agentcron.runtime.clock import Clock
from agentcron.store.errors import JobNotFoundError
from agentcron.store.interface import JobCatalog, RunRecords
from agentcron.wake.arms import ArmClient, RelayArms, wire_time
from agentcron.wake.seed002 import Seed002Arms, Seed002FireVerifier
from agentcron.wake.verify import (
    LEEWAY,
    FireClaims,
    FireVerifier,
    JwksCache,
    RelayFireVerifier,
    VerifierNotReadyError,
)

log = logging.getLogger(__name__)

Subscribe = Callable[[Callback, Iterable[type[Event]]], Callable[[], None]]
_RETRY_FIRST, _RETRY_MAX = 0.5, 30.0
_RECENT_RUNS = 20
_NOT_A_CHANGE = frozenset({JobAction.FIRED, JobAction.FINISHED})


class WakeProvider(Protocol):
    """What the server needs of a provider: its life, its state, and (managed) the fires."""

    @property
    def active(self) -> str: ...  # "local" or "managed": what wakes the engine now

    @property
    def verifier(self) -> FireVerifier | None: ...  # None: /api/cron/fire is off

    webhook: Counter[str]  # webhook requests by result
    fires: Counter[str]  # delivered fires by outcome

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, Any]: ...

    def deliver(self, fire: FireClaims) -> None: ...


class LocalWake:
    """The engine's own timer (nothing to do). `configured` / `reason` say why it is local
    when `managed` was asked for and cannot be used.
    """

    verifier: FireVerifier | None = None

    def __init__(self, configured: str = "local", reason: str | None = None) -> None:
        self.configured = configured
        self.reason = reason
        self.webhook: Counter[str] = Counter()
        self.fires: Counter[str] = Counter()

    @property
    def active(self) -> str:
        return "local"

    async def start(self) -> None:
        if self.reason:
            log.warning("wake: running on the local timer: %s", self.reason)

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {"provider": "local", "configured": self.configured, "reason": self.reason}

    def deliver(self, fire: FireClaims) -> None:
        self.fires["off"] += 1


class ManagedWake:
    """A managed wake: fires delivered by a wake service, arms kept by reconcile."""

    def __init__(
        self,
        *,
        engine: Engine,
        catalog: JobCatalog,
        runs: RunRecords,
        subscribe: Subscribe,
        clock: Clock,
        arms: ArmClient,
        verifier: FireVerifier,
        callback_url: str,
    ) -> None:
        self._engine = engine
        self._catalog = catalog
        self._runs = runs
        self._subscribe = subscribe
        self._clock = clock
        self.arms = arms
        self.verifier = verifier
        self.callback_url = callback_url.rstrip("/")
        self.webhook: Counter[str] = Counter()
        self.fires: Counter[str] = Counter()
        self.reconciles: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._active = "local"
        self.reason: str | None = "starting"
        self.last_error: str | None = None
        self._dirty = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def active(self) -> str:
        return self._active

    def prepare(self) -> None:
        """Before the engine starts: no timer (the first loop claims nothing on its own)."""
        self._engine.timer = False

    async def start(self) -> None:
        """After the engine started: make the verifier ready (fetch its JWKS), then turn
        managed and reconcile; when it is not ready, run on the local timer and keep trying.
        """
        self._unsubscribe = self._subscribe(self._changed, (JobEvent, FireStarted))
        try:
            await self.verifier.ready()
        except VerifierNotReadyError as exc:
            self._fall_back(f"the fire verifier is not ready ({exc}); retrying")
            self._spawn(self._retry_keys())
            return
        self._go_managed()

    def _fall_back(self, reason: str) -> None:
        self._active, self.reason = "local", reason
        self._engine.set_timer(True)
        log.warning("wake: managed wake not usable, running on the local timer: %s", reason)

    def _go_managed(self) -> None:
        self._active, self.reason = "managed", None
        self._engine.set_timer(False)
        log.info("wake: managed (fires come from %s)", self.verifier.issuer)
        self._spawn(self._reconciler())
        self._dirty.set()

    async def _retry_keys(self) -> None:
        delay = _RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            try:
                await self.verifier.ready()
            except VerifierNotReadyError as exc:
                self.reason = f"the fire verifier is not ready ({exc}); retrying"
                delay = min(delay * 2, _RETRY_MAX)
                continue
            self._go_managed()
            return

    async def stop(self) -> None:
        """Stop reconciling (the arms stay: they are what wakes this agent again)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.arms.aclose()

    def status(self) -> dict[str, Any]:
        return {
            "provider": self._active,
            "configured": "managed",
            "reason": self.reason,
            "callback_url": self.callback_url,
            "issuer": self.verifier.issuer,
            "last_error": self.last_error,
        }

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- reconcile -------------------------------------------------------------------------

    def _changed(self, event: Event) -> None:
        """A job changed or a fire moved: its next fire may have changed (a turn's start
        and end are not such moments; the fire's start and its settled record are).
        """
        if isinstance(event, JobEvent) and event.action in _NOT_A_CHANGE:
            return
        self._dirty.set()

    def poke(self) -> None:
        """Reconcile soon: a job changed in another process (the store's signals), a fire
        was dropped.
        """
        self._dirty.set()

    async def _reconciler(self) -> None:
        """One reconcile at a time; changes during one make one more. A failure is retried
        with backoff (0.5 s doubling to 30 s) or at the next change, whichever comes first.
        """
        delay = _RETRY_FIRST
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.reconcile()
            except Exception as exc:
                self.reconciles["failed"] += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("wake: reconcile failed (retrying in %.1fs): %s", delay, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._dirty.wait(), delay)
                delay = min(delay * 2, _RETRY_MAX)
                self._dirty.set()
            else:
                self.reconciles["ok"] += 1
                self.last_error = None
                delay = _RETRY_FIRST

    async def reconcile(self) -> None:
        """Make the armed state (the service's list) equal to the desired state (each enabled
        job's next due time, at the wire's whole second): arm what is missing or moved,
        cancel what no job wants.
        """
        jobs = await self._catalog.list_jobs(enabled=True)
        desired = {j.id: wire_time(j.next_run_at) for j in jobs if j.next_run_at is not None}
        armed = {a.job_id: a for a in await self.arms.list()}
        for job_id, at in desired.items():
            arm = armed.get(job_id)
            if arm is None or arm.fire_at != at or arm.callback_url != self.callback_url:
                await self.arms.provision(job_id, at, self.callback_url)
                self.calls["provision"] += 1
        for job_id in armed.keys() - desired.keys():
            await self.arms.cancel(job_id)
            self.calls["cancel"] += 1

    # -- fires -----------------------------------------------------------------------------

    def deliver(self, fire: FireClaims) -> None:
        """A verified fire: decide in the background (the webhook answers 202 at once)."""
        self._spawn(self._deliver(fire))

    async def _deliver(self, fire: FireClaims) -> None:
        outcome = await self.classify(fire.job_id, fire.fire_at)
        self.fires[outcome] += 1
        extra = {"job_id": fire.job_id, "fire_at": fire.fire_at.isoformat(), "jti": fire.jti}
        if outcome == "claimed":
            self._engine.claim_for(fire.fire_at)
            log.info("wake: fire delivered; claiming", extra=extra)
        else:
            log.warning("wake: fire dropped (%s)", outcome, extra=extra)
            self._dirty.set()  # the service's arm may be out of date

    async def classify(self, job_id: str, fire_at: datetime) -> str:
        """What to do with a delivered fire: `claimed` (its job is due by then: claim it),
        `duplicate` (already fired: a retried or replayed delivery), `stale` (the job moved on
        past it), `unknown_job`, `inactive` (paused, or no fire left), `early`.
        """
        try:
            job = await self._catalog.get_job(job_id)
        except JobNotFoundError:
            return "unknown_job"
        armed = job.enabled and job.next_run_at is not None
        if armed and job.next_run_at is not None and wire_time(job.next_run_at) <= fire_at:
            return "early" if fire_at > self._clock.now() + LEEWAY else "claimed"
        recent = await self._runs.list_runs(job_id=job_id, limit=_RECENT_RUNS)
        if any(wire_time(r.fire_at) == fire_at for r in recent):
            return "duplicate"
        return "stale" if armed else "inactive"


def resolve(
    settings: WakeSettings,
    *,
    engine: Engine,
    catalog: JobCatalog,
    runs: RunRecords,
    subscribe: Subscribe,
    clock: Clock,
    arms: ArmClient | None = None,
    verifier: FireVerifier | None = None,
    jwks_cooldown: float = 30.0,
) -> LocalWake | ManagedWake:
    """The provider the settings ask for, or the local timer (with the reason) when `managed`
    lacks a setting. `arms` replaces the service's client (`wake.service`: the relay's or
    seed 002's) and `verifier` the fire verifier (`wake.verifier`, default the service's).
    """
    if settings.provider != "managed":
        return LocalWake()
    missing = settings.missing(arms=arms is not None, verifier=verifier is not None)
    if missing:
        return LocalWake("managed", f"managed wake needs {', '.join(missing)}")
    if verifier is None:
        keys = JwksCache(settings.jwks or "", cooldown=jwks_cooldown)
        audience, issuer = settings.audience or "", settings.expected_issuer or ""
        if settings.token_form == "seed002":
            verifier = Seed002FireVerifier(keys, audience=audience, issuer=issuer, now=clock.now)
        else:
            verifier = RelayFireVerifier(keys, audience=audience, issuer=issuer)
    if arms is None:
        url, token = settings.relay_url or "", settings.relay_token or ""
        arms = Seed002Arms(url, token) if settings.service == "seed002" else RelayArms(url, token)
    return ManagedWake(
        engine=engine,
        catalog=catalog,
        runs=runs,
        subscribe=subscribe,
        clock=clock,
        arms=arms,
        verifier=verifier,
        callback_url=settings.callback_url or "",
    )
