"""`POST /api/cron/fire`: a managed wake's fire webhook, and the wake's metrics.

Outside the API token: the caller is the wake service (the relay, or a seed-002 service),
authenticated by a short-lived JWT it signs, checked by the wake's `FireVerifier`
(`wake/verify.py`, `wake/seed002.py`, or the user's own). Invalid or missing token -> 401
(nothing runs), a body without `job_id` -> 400, else 202 at once: the fire is decided and
claimed in the background (`ManagedWake.deliver`: the engine's own claim, so a retried or
replayed delivery still runs once).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agentcron.server.auth import bearer
from agentcron.server.errors import error_body
from agentcron.views import FireAcceptedOut
from agentcron.wake.provider import WakeProvider
from agentcron.wake.verify import FireRequestError, FireTokenError

log = logging.getLogger(__name__)
router = APIRouter(tags=["wake"])
_MAX_BODY = 16 * 1024


def _unauthorized(wake: WakeProvider, reason: str, detail: str) -> JSONResponse:
    wake.webhook[f"unauthorized:{reason}"] += 1
    log.warning("fire webhook refused (%s): %s", reason, detail)
    return JSONResponse(
        error_body("unauthorized", f"fire token refused: {detail}"),
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )


@router.post(
    "/api/cron/fire",
    status_code=202,
    responses={202: {"model": FireAcceptedOut, "description": "taken: claimed and run at once"}},
)
async def fire(request: Request) -> JSONResponse:
    wake: WakeProvider | None = getattr(request.app.state, "wake", None)
    if wake is None or wake.verifier is None:
        if wake is not None:
            wake.webhook["off"] += 1
        return JSONResponse(
            error_body("not_found", "managed wake is off (see docs/managed-wake.md)"), 404
        )
    raw = await request.body()
    body: Any = None
    if len(raw) <= _MAX_BODY:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
    try:  # the token first: a caller without one learns nothing of the body's checks
        fired = await wake.verifier.verify(bearer(request), body if isinstance(body, dict) else {})
    except FireTokenError as exc:
        return _unauthorized(wake, exc.reason, str(exc))
    except FireRequestError as exc:
        wake.webhook["bad_request"] += 1
        return JSONResponse(error_body("invalid_request", str(exc)), 400)
    except Exception as exc:  # a verifier of the user's that broke: refuse (fail closed)
        log.exception("fire webhook: the verifier failed")
        return _unauthorized(wake, "verifier_error", f"the verifier failed ({type(exc).__name__})")
    wake.webhook["accepted"] += 1
    wake.deliver(fired)
    accepted = FireAcceptedOut(status="accepted", job_id=fired.job_id)
    return JSONResponse(accepted.json_dict(), status_code=202)


class WakeCollector(Collector):
    """The wake's state and counters, read at scrape time."""

    def __init__(self, wake: WakeProvider) -> None:
        self._wake = wake

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        wake = self._wake
        status = wake.status()
        provider = GaugeMetricFamily(
            "agentcron_wake_provider",
            "What wakes the engine now (1) against what was configured",
            labels=["provider", "configured"],
        )
        provider.add_metric([status["provider"], str(status["configured"])], 1)
        yield provider
        hooks = CounterMetricFamily(
            "agentcron_fire_webhook_requests",
            "Fire webhook requests by result (unauthorized:<reason> = 401, nothing ran)",
            labels=["result"],
        )
        for result, count in sorted(wake.webhook.items()):
            hooks.add_metric([result], count)
        yield hooks
        fires = CounterMetricFamily(
            "agentcron_managed_fires",
            "Accepted fires by outcome (claimed, duplicate, stale, unknown_job, inactive, early)",
            labels=["outcome"],
        )
        for outcome, count in sorted(wake.fires.items()):
            fires.add_metric([outcome], count)
        yield fires
        for name, doc, counter in (
            ("agentcron_wake_reconciles", "Reconciles with the wake service", "reconciles"),
            ("agentcron_wake_arm_calls", "Arm calls made by reconcile", "calls"),
        ):
            values = getattr(wake, counter, None)
            family = CounterMetricFamily(name, doc, labels=["result"])
            for key, count in sorted((values or {}).items()):
                family.add_metric([key], count)
            yield family
