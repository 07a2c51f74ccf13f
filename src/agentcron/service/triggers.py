"""A job's trigger: turn it on, rotate or turn off its secret, and take an event posted to it
(verified with the `standardwebhooks` library, de-duplicated by its id, fired as a run of the
job through the same path as a manual run).
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from agentcron.domain.events import JobAction
from agentcron.domain.jobs import Job, JobKind
from agentcron.domain.triggers import (
    EVENT_ID_KEPT,
    SECRET_BYTES,
    SECRET_PREFIX,
    EventAccepted,
    EventHeaders,
    TriggerKey,
    TriggerNotFoundError,
    TriggerSignatureError,
    TriggerStateError,
    check_headers,
    event_text,
)
from agentcron.limits import MAX_EVENT_BYTES
from agentcron.runtime.clock import Clock
from agentcron.store.errors import JobNotFoundError, VersionConflictError
from agentcron.store.interface import JobCatalog, RunRecords

log = logging.getLogger(__name__)

_CAS_RETRIES = 5


def new_secret() -> str:
    """A fresh Standard Webhooks secret: `whsec_` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


class Triggers:
    """Event-fired jobs (`cron.triggers`): a job's trigger secret, and the events posted to it."""

    def __init__(
        self,
        catalog: JobCatalog,
        records: RunRecords,
        clock: Clock,
        *,
        adopt: Callable[[], None],
        publish: Callable[[JobAction, Job], Awaitable[None]],
    ) -> None:
        self._catalog = catalog
        self._records = records
        self._clock = clock
        self._adopt = adopt  # this process's engine: an unclaimed run waits to be adopted
        self._publish = publish

    async def enable(self, job_id: str) -> TriggerKey:
        """Turn the job's trigger on: a new secret, returned once (only a rotation shows a
        secret again). TriggerStateError when it is on already, or the job is not a user's
        `agent_turn` job; JobNotFoundError.
        """
        secret = new_secret()

        def change(job: Job) -> dict[str, Any]:
            if job.trigger:
                raise TriggerStateError(
                    f"job {job.id!r} has a trigger already: rotate it for a new secret"
                )
            return {"trigger_secret": secret}

        job = await self._change(job_id, change)
        log.info("trigger enabled", extra={"job_id": job.id})
        return TriggerKey(job.id, secret)

    async def rotate(self, job_id: str) -> TriggerKey:
        """A new secret for the job's trigger, returned once; the old one stops verifying at
        once. TriggerStateError when its trigger is off; JobNotFoundError.
        """
        secret = new_secret()

        def change(job: Job) -> dict[str, Any]:
            if not job.trigger:
                raise TriggerStateError(f"job {job.id!r} has no trigger: enable it first")
            return {"trigger_secret": secret}

        job = await self._change(job_id, change)
        log.info("trigger secret rotated", extra={"job_id": job.id})
        return TriggerKey(job.id, secret)

    async def disable(self, job_id: str) -> Job:
        """Turn the job's trigger off (its secret is forgotten; events get 404). Idempotent;
        JobNotFoundError.
        """
        job = await self._catalog.get_job(job_id)
        if not job.trigger:
            return job
        job = await self._change(job_id, lambda _job: {"trigger_secret": None})
        log.info("trigger disabled", extra={"job_id": job.id})
        return job

    async def deliver(self, job_id: str, headers: Mapping[str, str], body: bytes) -> EventAccepted:
        """An event posted to the job's trigger: checked in this order, each failure refusing
        it with nothing run: the body's size (EventTooLargeError), the job and its trigger
        (TriggerNotFoundError, one error for both), the headers and the timestamp
        (EventRequestError), the signature (TriggerSignatureError), the body is JSON
        (EventRequestError). Then a run of the job carrying the event, unless its id was
        delivered before (`duplicate`: the first delivery's run, nothing fired).
        """
        if len(body) > MAX_EVENT_BYTES:
            event_text(body)  # raises EventTooLargeError
        try:
            job = await self._catalog.get_job(job_id)
        except JobNotFoundError:
            raise TriggerNotFoundError(job_id) from None
        secret = job.trigger_secret
        if secret is None:
            raise TriggerNotFoundError(job_id)
        now = self._clock.now()
        checked = check_headers(headers, now)
        _verify(secret, body, checked)
        text = event_text(body)
        if not job.enabled:
            raise TriggerStateError(f"job {job_id!r} is paused: its events run nothing")
        try:
            run, run_id, duplicate = await self._records.insert_event_run(
                job_id, checked.event_id, text, now, now + EVENT_ID_KEPT
            )
        except JobNotFoundError:  # deleted meanwhile
            raise TriggerNotFoundError(job_id) from None
        if not duplicate:
            self._adopt()  # this process does not hear its own notice
        log.info(
            "trigger event %s",
            "repeated (nothing fired)" if duplicate else "accepted",
            extra={"job_id": job_id, "event_id": checked.event_id, "run_id": run_id},
        )
        return EventAccepted(job_id, checked.event_id, run_id, duplicate, run)

    async def _change(self, job_id: str, compute: Callable[[Job], dict[str, Any]]) -> Job:
        attempt = 0
        while True:
            job = await self._catalog.get_job(job_id)
            if job.kind is not JobKind.AGENT_TURN:
                raise TriggerStateError(
                    f"job {job_id!r} is a {job.kind.value} job: only automations have a trigger"
                )
            try:
                updated = await self._catalog.update_job(
                    job_id, compute(job), self._clock.now(), expected_version=job.version
                )
            except VersionConflictError:
                attempt += 1
                if attempt >= _CAS_RETRIES:
                    raise
                continue
            await self._publish(JobAction.UPDATED, updated)
            return updated


def _verify(secret: str, body: bytes, checked: EventHeaders) -> None:
    """The Standard Webhooks signature, by the `standardwebhooks` library (imported here: it
    is loaded when first used). Its timestamp is the one `check_headers` already held against
    the injected clock, so the library does not read the system clock a second time (a fake
    clock's events verify too). Any failure is one TriggerSignatureError.
    """
    from standardwebhooks import Webhook
    from standardwebhooks.webhooks import WebhookVerificationError

    class _Checked(Webhook):
        # The library's own timestamp check (`Webhook.__verify_timestamp`, name-mangled)
        # answers the timestamp checked before. Were it renamed, the library's check against
        # the system clock would apply again: stricter, never looser.
        def _Webhook__verify_timestamp(self, timestamp_header: str) -> datetime:
            return checked.timestamp

    try:
        _Checked(secret).verify(body, checked.headers, json_parse=False)
    except (WebhookVerificationError, ValueError):  # ValueError: a malformed signature
        raise TriggerSignatureError() from None
