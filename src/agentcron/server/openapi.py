"""The OpenAPI document: each route's answer schema and every status it can give.

Routes return `views.py` JSON (typed `dict[str, Any]`); this module documents what that JSON
is (`server.schemas`) and which errors each operation can answer, all in the error shape
`{"error", "detail"}`, so that a client (or the schema fuzz test) can rely on the document.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from agentcron.server import schemas as s

_ANSWERS: dict[tuple[str, str], dict[int, type[BaseModel]]] = {
    ("post", "/api/sessions"): {201: s.SessionOut},
    ("get", "/api/sessions"): {200: s.SessionsOut},
    ("get", "/api/sessions/{key}"): {200: s.SessionDetailOut},
    ("delete", "/api/sessions/{key}"): {200: s.DeletionOut},
    ("get", "/api/sessions/{key}/messages"): {200: s.MessagesOut},
    ("post", "/api/sessions/{key}/messages"): {202: s.TurnStartedOut, 201: s.NoteOut},
    ("post", "/api/sessions/{key}/send"): {201: s.SentOut},
    ("get", "/api/sessions/{key}/turns"): {200: s.TurnsOut},
    ("post", "/api/sessions/{key}/stop"): {200: s.StopOut},
    ("get", "/api/sessions/{key}/runs"): {200: s.RunsOut},
    ("get", "/api/sessions/{key}/usage"): {200: s.UsageOut},
    ("get", "/api/sessions/{key}/recalls"): {200: s.RecallsOut},
    ("get", "/api/sessions/{key}/recall"): {200: s.PendingRecallOut},
    ("delete", "/api/sessions/{key}/recall"): {200: s.CancelledRecallOut},
    ("post", "/api/sessions/{key}/recall/skip"): {200: s.SkippedRecallOut},
    ("post", "/api/jobs"): {201: s.JobOut},
    ("get", "/api/jobs"): {200: s.JobsOut},
    ("get", "/api/jobs/{job_id}"): {200: s.JobDetailOut},
    ("patch", "/api/jobs/{job_id}"): {200: s.JobOut},
    ("post", "/api/jobs/{job_id}/pause"): {200: s.JobOut},
    ("post", "/api/jobs/{job_id}/resume"): {200: s.JobOut},
    ("delete", "/api/jobs/{job_id}"): {200: s.DeletedJobOut},
    ("get", "/api/jobs/{job_id}/runs"): {200: s.RunsOut},
    ("get", "/api/runs/{run_id}"): {200: s.RunFullOut},
    ("get", "/api/turns/{turn_id}"): {200: s.TurnDetailOut},
    ("get", "/api/deliveries"): {200: s.DeliveriesOut},
    ("get", "/api/channels"): {200: s.ChannelsOut},
    ("get", "/api/approvals"): {200: s.ApprovalsOut},
    ("get", "/api/approvals/{approval_id}"): {200: s.ApprovalOut},
    ("post", "/api/approvals/{approval_id}"): {200: s.ApprovalOut},
    ("post", "/api/approvals/{approval_id}/decide"): {200: s.ApprovalOut},
    ("post", "/hooks/agent"): {202: s.HookOut},
    ("get", "/healthz"): {200: s.HealthOut},
    ("get", "/readyz"): {200: s.ReadyOut, 503: s.ReadyOut},
}

_TEXT: dict[tuple[str, str], str] = {
    ("get", "/metrics"): "Prometheus metrics (text exposition format)",
}

_ERRORS = {
    400: "a malformed request (a Content-Length that is not a number)",
    401: "no token, or a wrong one",
    403: "forbidden: a system job cannot be changed or removed this way, or a decision URL's "
    "token is not valid for its approval",
    404: "no such resource (or the inbound hook, or managed wake, is off)",
    409: "a conflict: the resource changed meanwhile, exists with other values, or a limit",
    413: "the request body is over the limit (1 MiB)",
    422: "an invalid request: each problem, where and what is accepted",
}


def _errors_of(method: str, path: str, operation: dict[str, Any]) -> list[int]:
    codes = [422]
    if path.startswith(("/api/", "/hooks/")):
        codes.append(401)
    if "{" in path or path.startswith("/hooks/") or path == "/api/cron/fire":
        codes.append(404)
    if "requestBody" in operation or method in ("post", "patch", "put"):
        codes += [400, 413]
    if method in ("post", "patch", "delete") and path.startswith("/api/"):
        codes.append(409)
    if path.startswith("/api/jobs/{job_id}") and method != "get":
        codes.append(403)
    if path == "/api/approvals/{approval_id}/decide":
        codes.remove(401)  # no API token: the approval's own token, 403 when wrong
        codes.append(403)
    return codes


def _ref(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in [*schema.pop("$defs", {}).items(), (model.__name__, schema)]:
        if components.setdefault(name, definition) != definition:
            raise RuntimeError(f"two schemas named {name} in the OpenAPI document")
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def document_responses(app: FastAPI) -> None:
    """Build the app's OpenAPI document once, with the answers and errors above."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            description=app.description,
            routes=app.routes,
        )
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        error = _ref(s.ErrorOut, components)
        for path, item in doc.get("paths", {}).items():
            for method, operation in item.items():
                responses = operation.setdefault("responses", {})
                for status, model in _ANSWERS.get((method, path), {}).items():
                    old = responses.get(str(status), {})
                    description = old.get("description") or "Successful Response"
                    responses[str(status)] = _json(_ref(model, components), description)
                if (method, path) in _TEXT:
                    responses["200"] = {
                        "description": _TEXT[(method, path)],
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                if (method, path) in _ANSWERS:
                    for status in list(responses):
                        if status.startswith("2") and int(status) not in _ANSWERS[(method, path)]:
                            del responses[status]
                for code in _errors_of(method, path, operation):
                    responses[str(code)] = _json(error, _ERRORS[code])
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
