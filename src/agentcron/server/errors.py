"""Typed errors mapped once to clear HTTP answers: `{"error": <kind>, "detail": <what to fix>}`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException

from agentcron.channels.manager import ChannelNotRunningError
from agentcron.config import ConfigError
from agentcron.domain.approvals import ApprovalError, ApprovalNotFoundError
from agentcron.domain.grants import GrantNotFoundError
from agentcron.domain.triggers import (
    EventRequestError,
    EventTooLargeError,
    TriggerNotFoundError,
    TriggerSignatureError,
    TriggerStateError,
)
from agentcron.errors import AgentcronError, InvalidInputError
from agentcron.schedule import ScheduleError
from agentcron.store.errors import (
    ConflictError,
    DeliveryNotFailedError,
    DeliveryNotFoundError,
    JobLimitError,
    JobNotFoundError,
    ProtectedJobError,
    RecallNotFoundError,
    RunNotFoundError,
    SessionNotFoundError,
    StoreUnavailableError,
    TurnNotFoundError,
    VersionConflictError,
)
from agentcron.turns.prompts import PromptError

log = logging.getLogger(__name__)

_STATUS: list[tuple[type[Exception], int, str]] = [
    (JobNotFoundError, 404, "not_found"),
    (RunNotFoundError, 404, "not_found"),
    (SessionNotFoundError, 404, "not_found"),
    (RecallNotFoundError, 404, "not_found"),
    (TurnNotFoundError, 404, "not_found"),
    (ProtectedJobError, 403, "protected"),
    (VersionConflictError, 409, "conflict"),
    (JobLimitError, 409, "job_limit"),
    (ConflictError, 409, "conflict"),
    (DeliveryNotFoundError, 404, "not_found"),
    (DeliveryNotFailedError, 409, "conflict"),  # delivered, or still pending
    (ChannelNotRunningError, 409, "conflict"),
    (ApprovalNotFoundError, 404, "not_found"),
    (GrantNotFoundError, 404, "not_found"),
    (ApprovalError, 409, "conflict"),  # already decided, or expired
    (TriggerNotFoundError, 404, "not_found"),  # no such job, or its trigger is off: alike
    (TriggerSignatureError, 401, "unauthorized"),
    (EventRequestError, 400, "invalid_request"),
    (EventTooLargeError, 413, "too_large"),
    (TriggerStateError, 409, "conflict"),
    (ScheduleError, 422, "invalid_schedule"),
    (ConfigError, 422, "invalid_setting"),
    (InvalidInputError, 422, "invalid_value"),
    (ValidationError, 422, "invalid_value"),  # a model validated inside the domain
    (PromptError, 500, "prompt_error"),
    # An outage, not a fault of the request nor a bug: one warning line, Retry-After.
    (StoreUnavailableError, 503, "unavailable"),
    (AgentcronError, 500, "internal_error"),  # raised on purpose but not for a request
]


def error_body(kind: str, detail: object) -> dict[str, object]:
    return {"error": kind, "detail": detail}


class ErrorOut(BaseModel):  # the shape of `error_body`, for the OpenAPI document
    """Every 4xx: what kind of error, and what to fix."""

    error: str = Field(description="not_found, invalid_request, invalid_value, conflict, ...")
    detail: str | list[str] | dict[str, Any] | None = Field(description="what to fix")


# What each error status means. The routes (or their routers, where the app includes them)
# declare the statuses they can answer with `answers`; the OpenAPI document says it from there.
_MEANING = {
    400: "a malformed request (a Content-Length that is not a number; an event's missing or "
    "malformed webhook headers, a timestamp more than 5 minutes off, a body that is not JSON)",
    401: "no token, or a wrong one (a trigger: a signature that does not verify)",
    403: "forbidden: a system job cannot be changed or removed this way, or a decision URL's "
    "token is not valid for its approval",
    404: "no such resource (or the inbound hook, or managed wake, is off)",
    409: "a conflict: the resource changed meanwhile, exists with other values, or a limit",
    413: "the request body is over the limit (1 MiB; an event posted to a trigger: 64 KiB)",
    422: "an invalid request: each problem, where and what is accepted",
}
# A request with a body can be malformed (400) or too large (413); a change can conflict (409).
BODY = (400, 413)
CHANGE = (*BODY, 409)


def answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers `codes` as a route's (or router's) `responses`, all in `ErrorOut`."""
    return {code: {"model": ErrorOut, "description": _MEANING[code]} for code in codes}


_JSON_HINT = 'send one JSON object, e.g. {"content": "hello"}, with Content-Type: application/json'


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _validation_detail(exc: RequestValidationError, request: Request) -> list[str]:
    """One readable line per problem: where, what is wrong, what was given."""
    content_type = request.headers.get("content-type", "")
    body_problem = any(p.get("loc", ())[:1] == ("body",) for p in exc.errors())
    if body_problem and request.method in ("POST", "PATCH", "PUT") and not _is_json(content_type):
        given = f"{content_type!r}" if content_type else "none"
        return [
            f"body: the request body must be JSON: send the header "
            f"'Content-Type: application/json' (got Content-Type {given})"
        ]
    lines = []
    for problem in exc.errors():
        loc = problem.get("loc", ())
        kind = problem.get("type")
        if kind == "json_invalid":
            position = loc[1] if len(loc) > 1 else "?"
            why = problem.get("ctx", {}).get("error", "JSON decode error")
            lines.append(f"body: not valid JSON at character {position}: {why}; {_JSON_HINT}")
            continue
        where = ".".join(str(p) for p in loc if p != "body") or "body"
        if kind == "extra_forbidden":
            lines.append(f"{where}: unknown field (misspelt? the accepted fields are in /docs)")
            continue
        lines.append(f"{where}: {problem.get('msg', 'invalid')}")
    return lines


UNAVAILABLE_DETAIL = "the database is unreachable; try again"


def _unavailable(request: Request, exc: StoreUnavailableError) -> JSONResponse:
    log.warning(
        "request refused, the database is unavailable: %s",
        exc.reason,
        extra={"path": request.url.path},
    )
    return JSONResponse(
        error_body("unavailable", UNAVAILABLE_DETAIL),
        status_code=503,
        headers={"Retry-After": str(exc.retry_after_s)},
    )


def install(app: FastAPI) -> None:
    async def on_store_error(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, StoreUnavailableError):
            return _unavailable(request, exc)
        for kind, code, name in _STATUS:
            if isinstance(exc, kind):
                if code >= 500:
                    log.error("request failed: %s", exc, extra={"path": request.url.path})
                detail: object = str(exc)
                if isinstance(exc, ValidationError):
                    detail = [
                        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                        for e in exc.errors()
                    ]
                return JSONResponse(error_body(name, detail), status_code=code)
        raise exc  # pragma: no cover - only registered for the classes above

    for kind, _, _ in _STATUS:
        app.add_exception_handler(kind, on_store_error)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RequestValidationError):  # registered for that class only
            raise exc
        return JSONResponse(error_body("invalid_request", _validation_detail(exc, request)), 422)

    app.add_exception_handler(RequestValidationError, on_validation)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, HTTPException):  # registered for that class only
            raise exc
        kind = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found"}.get(
            exc.status_code, "http_error"
        )
        detail = exc.detail
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = f"the body could not be parsed (nested too deeply?); {_JSON_HINT}"
        body = error_body(kind, detail)
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    app.add_exception_handler(HTTPException, on_http)
