"""Liveness, readiness and Prometheus metrics (outside /api, without a token)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from agentcron.server.deps import Cron
from agentcron.store.errors import StoreUnavailableError
from agentcron.views import HealthOut, ReadyOut

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])

READY_TIMEOUT_S = 2.0  # a database that takes longer to answer one count is not ready


@router.get("/healthz")
async def healthz() -> HealthOut:
    return HealthOut(status="ok")


@router.get(
    "/readyz",
    responses={200: {"model": ReadyOut}, 503: {"model": ReadyOut, "description": "not ready"}},
)
async def readyz(cron: Cron, request: Request) -> JSONResponse:
    """Ready when the database answers and the engine runs."""
    problems = []
    timeout = READY_TIMEOUT_S
    try:
        async with asyncio.timeout(timeout):
            await cron.jobs.count()
    except TimeoutError:
        log.warning("readiness: the database did not answer within %g s", timeout)
        problems.append(f"database: no answer within {timeout:g} s")
    except StoreUnavailableError as exc:
        log.warning("readiness: the database does not answer: %s", exc.reason)
        problems.append(f"database: {exc.reason}")
    except Exception as exc:
        log.warning("readiness: the database does not answer: %s", exc)
        problems.append(f"database: {type(exc).__name__}: {exc}")
    if not cron.running:
        problems.append("engine: not running")
    wake = getattr(request.app.state, "wake", None)
    body = ReadyOut(
        status="ready" if not problems else "not ready",
        problems=problems,
        wake=None if wake is None else wake.status(),  # which provider wakes it, and why
    )
    return JSONResponse(body.json_dict(), status_code=200 if not problems else 503)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"description": "Prometheus metrics (text exposition format)"}},
)
async def metrics(request: Request) -> Response:
    return Response(await request.app.state.metrics.scrape(), media_type=CONTENT_TYPE_LATEST)
