"""Where the CLI's commands go: a running server's HTTP API, or the database directly.

Both answer with the API's JSON views. The database backend calls the same use cases the
server's routes call (`agentcron.service`), on an AgentCron whose store is open but whose engine
is not started, so a command behaves the same either way. Nothing here imports `server/`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from agentcron import views
from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.config import ConfigError, Settings
from agentcron.config.database import sqlite_file, where
from agentcron.domain.approvals import Decision
from agentcron.domain.budgets import Budget
from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.jobs import JobKind
from agentcron.domain.states import RunState
from agentcron.domain.triggers import trigger_path
from agentcron.errors import AgentcronError
from agentcron.limits import NameText
from agentcron.service.job_requests import GrantCreate, JobCreate, JobPatch, JobRenew
from agentcron.service.paging import DEFAULT_PAGE, MAX_PAGE
from agentcron.service.sessions import SessionCreate, SessionPatch
from agentcron.store.errors import StoreUnavailableError

_T = TypeVar("_T")
NEWEST = 2**53  # `before` past every seq: the newest transcript entries
_APPROVALS = 500  # `approvals list`: at most this many (the database backend's bound)
_DECIDER: TypeAdapter[str] = TypeAdapter(NameText)  # `by` of a decision, as the API checks it


class CliError(AgentcronError):
    """An expected failure, told to the user in one line (exit code 1)."""


def validation_line(exc: ValidationError) -> str:
    """A pydantic error as one line, as the API words it: `field: problem; ...`."""
    return "; ".join(
        f"{'.'.join(str(p) for p in problem['loc']) or 'body'}: {problem['msg']}"
        for problem in exc.errors()
    )


def _first_line(exc: BaseException) -> str:
    """The driver's own message of a database error, without SQLAlchemy's background link."""
    inner = getattr(exc, "orig", None) or exc
    return (str(inner).strip().splitlines() or [type(inner).__name__])[0]


def _path(prefix: str, *parts: str) -> str:
    """`prefix` then each part percent-encoded (a session key is free text after its `:`)."""
    return "/".join([prefix, *(quote(part, safe=":") for part in parts)])


@dataclass(frozen=True, slots=True)
class PageAsk:
    """Which page of a list: its size, the cursor the page before gave, a search."""

    limit: int = DEFAULT_PAGE
    cursor: str | None = None
    search: str | None = None  # the sessions' `q`

    def params(self) -> dict[str, str | int]:
        found: dict[str, str | int] = {"limit": self.limit}
        if self.cursor is not None:
            found["cursor"] = self.cursor
        if self.search is not None:
            found["q"] = self.search
        return found


@dataclass(frozen=True, slots=True)
class RunQuery:
    """A page of the run history: the filters of `GET /api/runs`."""

    job: str | None = None
    session: str | None = None
    states: tuple[RunState, ...] = ()
    since: datetime | None = None
    page: PageAsk = PageAsk()

    def params(self) -> dict[str, Any]:
        found: dict[str, Any] = {**self.page.params()}
        if self.job is not None:
            found["job_id"] = self.job
        if self.session is not None:
            found["session_key"] = self.session
        if self.states:
            found["state"] = [s.value for s in self.states]
        if self.since is not None:
            found["since"] = self.since.isoformat()
        return found


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """The usage per day: the filters of `GET /api/usage` (days in `tz`)."""

    session: str | None
    job: str | None
    since: date
    until: date
    tz: str

    def params(self) -> dict[str, str]:
        found = {"since": self.since.isoformat(), "until": self.until.isoformat(), "tz": self.tz}
        if self.session is not None:
            found["session_key"] = self.session
        if self.job is not None:
            found["job_id"] = self.job
        return found


class Backend(Protocol):
    async def __aenter__(self) -> Backend: ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def create_session(
        self, key: str, tz: str | None, title: str | None, runner_url: str | None = None
    ) -> dict[str, Any]: ...
    async def list_sessions(self, page: PageAsk) -> dict[str, Any]: ...
    async def get_session(self, key: str) -> dict[str, Any]: ...
    async def set_quiet_hours(self, key: str, hours: str | None) -> dict[str, Any]: ...
    async def session_budget(self, key: str, caps: dict[str, Any] | None) -> dict[str, Any]: ...
    async def session_spend(self, key: str, days: int) -> dict[str, Any]: ...
    async def newest_messages(self, key: str, limit: int, cursor: str | None) -> dict[str, Any]: ...
    async def delete_session(self, key: str, confirm: bool) -> dict[str, Any]: ...
    async def note(self, key: str, text: str) -> dict[str, Any]: ...
    async def send_out(self, key: str, text: str) -> dict[str, Any]: ...
    async def channels(self) -> dict[str, Any]: ...
    async def add_job(self, body: dict[str, Any]) -> dict[str, Any]: ...
    async def update_job(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def list_jobs(
        self, session: str | None, kind: str | None, enabled: bool | None, page: PageAsk
    ) -> dict[str, Any]: ...
    async def get_job(self, job_id: str) -> dict[str, Any]: ...
    async def job_spend(self, job_id: str, days: int) -> dict[str, Any]: ...
    async def job_action(self, job_id: str, action: str) -> dict[str, Any]: ...
    async def run_job(self, job_id: str) -> dict[str, Any]: ...
    async def renew_job(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def job_trigger(self, job_id: str, action: str) -> dict[str, Any]: ...
    async def list_runs(self, query: RunQuery) -> dict[str, Any]: ...
    async def usage(self, query: UsageQuery) -> dict[str, Any]: ...
    async def get_run(self, run_id: str) -> dict[str, Any]: ...
    async def list_approvals(self, session: str | None, all: bool) -> dict[str, Any]: ...
    async def get_approval(self, approval_id: str) -> dict[str, Any]: ...
    async def list_grants(self, job_id: str) -> dict[str, Any]: ...
    async def add_grant(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    async def revoke_grant(self, job_id: str, grant_id: str) -> dict[str, Any]: ...
    async def decide_approval(
        self, approval_id: str, decision: Decision, by: str
    ) -> dict[str, Any]: ...
    async def list_deliveries(
        self, session: str | None, state: DeliveryState | None, limit: int
    ) -> dict[str, Any]: ...
    async def retry_delivery(self, delivery_id: str) -> dict[str, Any]: ...


class ApiBackend:
    """A running `agentcron serve`, over HTTP with the bearer token."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30.0)

    async def __aenter__(self) -> ApiBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        try:
            response = await self._client.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise CliError(
                f"cannot reach the agentcron API at {self.url} ({type(exc).__name__}): start it "
                "with `agentcron serve`, point --api at it, or use --db for the database"
            ) from exc
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text[:200]}
        if response.status_code >= 400:
            detail = body.get("detail", body) if isinstance(body, dict) else body
            if isinstance(detail, list):
                detail = "; ".join(str(d) for d in detail)
            raise CliError(f"{detail} (HTTP {response.status_code})")
        if not isinstance(body, dict):
            raise CliError(f"unexpected answer from {self.url}{path}: {body!r}")
        return body

    async def create_session(
        self, key: str, tz: str | None, title: str | None, runner_url: str | None = None
    ) -> dict[str, Any]:
        body = {"key": key, "tz": tz, "title": title, "runner_url": runner_url}
        return await self._call("POST", "/api/sessions", json=body)

    async def list_sessions(self, page: PageAsk) -> dict[str, Any]:
        return await self._call("GET", "/api/sessions", params=page.params())

    async def get_session(self, key: str) -> dict[str, Any]:
        return await self._call("GET", _path("/api/sessions", key))

    async def set_quiet_hours(self, key: str, hours: str | None) -> dict[str, Any]:
        body = {"quiet_hours": hours}
        return await self._call("PATCH", _path("/api/sessions", key), json=body)

    async def session_budget(self, key: str, caps: dict[str, Any] | None) -> dict[str, Any]:
        if caps is None:
            return await self._call("DELETE", _path("/api/sessions", key, "budget"))
        return await self._call("PUT", _path("/api/sessions", key, "budget"), json=caps)

    async def session_spend(self, key: str, days: int) -> dict[str, Any]:
        path = _path("/api/sessions", key, "spend")
        return await self._call("GET", path, params={"days": days})

    async def newest_messages(self, key: str, limit: int, cursor: str | None) -> dict[str, Any]:
        params: dict[str, str | int] = {"before": NEWEST, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return await self._call("GET", _path("/api/sessions", key, "messages"), params=params)

    async def delete_session(self, key: str, confirm: bool) -> dict[str, Any]:
        params = {"confirm": "true"} if confirm else {}
        return await self._call("DELETE", _path("/api/sessions", key), params=params)

    async def note(self, key: str, text: str) -> dict[str, Any]:
        body = {"content": text, "trigger": False}
        return await self._call("POST", _path("/api/sessions", key, "messages"), json=body)

    async def send_out(self, key: str, text: str) -> dict[str, Any]:
        return await self._call("POST", _path("/api/sessions", key, "send"), json={"content": text})

    async def channels(self) -> dict[str, Any]:
        return await self._call("GET", "/api/channels")

    async def add_job(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", "/api/jobs", json=body)

    async def update_job(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("PATCH", _path("/api/jobs", job_id), json=body)

    async def list_jobs(
        self, session: str | None, kind: str | None, enabled: bool | None, page: PageAsk
    ) -> dict[str, Any]:
        params = {
            "session_key": session,
            "kind": kind,
            "enabled": None if enabled is None else str(enabled).lower(),
            **page.params(),
        }
        return await self._call(
            "GET", "/api/jobs", params={k: v for k, v in params.items() if v is not None}
        )

    async def get_job(self, job_id: str) -> dict[str, Any]:
        return await self._call("GET", _path("/api/jobs", job_id))

    async def job_spend(self, job_id: str, days: int) -> dict[str, Any]:
        return await self._call("GET", _path("/api/jobs", job_id, "spend"), params={"days": days})

    async def job_action(self, job_id: str, action: str) -> dict[str, Any]:
        if action == "rm":
            return await self._call("DELETE", _path("/api/jobs", job_id))
        return await self._call("POST", _path("/api/jobs", job_id, action))

    async def run_job(self, job_id: str) -> dict[str, Any]:
        return await self._call("POST", _path("/api/jobs", job_id, "run"))

    async def renew_job(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", _path("/api/jobs", job_id, "renew"), json=body)

    async def job_trigger(self, job_id: str, action: str) -> dict[str, Any]:
        # enable | rotate | disable
        if action == "disable":
            return await self._call("DELETE", _path("/api/jobs", job_id, "trigger"))
        if action == "rotate":
            return await self._call("POST", _path("/api/jobs", job_id, "trigger", "rotate"))
        return await self._call("POST", _path("/api/jobs", job_id, "trigger"))

    async def list_runs(self, query: RunQuery) -> dict[str, Any]:
        return await self._call("GET", "/api/runs", params=query.params())

    async def usage(self, query: UsageQuery) -> dict[str, Any]:
        return await self._call("GET", "/api/usage", params=query.params())

    async def get_run(self, run_id: str) -> dict[str, Any]:
        return await self._call("GET", _path("/api/runs", run_id))

    async def list_approvals(self, session: str | None, all: bool) -> dict[str, Any]:
        # As the database backend lists them: the pending ones (or the newest of all, at most
        # _APPROVALS), oldest first; the API gives them in pages, `all` newest first.
        params: dict[str, str | int] = {"all": str(all).lower(), "limit": MAX_PAGE}
        if session is not None:
            params["session_key"] = session
        found: list[Any] = []
        while True:
            page = await self._call("GET", "/api/approvals", params=params)
            found += page["approvals"]
            if page.get("next_cursor") is None or len(found) >= _APPROVALS:
                break
            params["cursor"] = page["next_cursor"]
        found = found[:_APPROVALS]
        return {"approvals": found[::-1] if all else found}

    async def get_approval(self, approval_id: str) -> dict[str, Any]:
        return await self._call("GET", _path("/api/approvals", approval_id))

    async def list_grants(self, job_id: str) -> dict[str, Any]:
        return await self._call("GET", _path("/api/jobs", job_id, "grants"))

    async def add_grant(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", _path("/api/jobs", job_id, "grants"), json=body)

    async def revoke_grant(self, job_id: str, grant_id: str) -> dict[str, Any]:
        return await self._call("DELETE", _path("/api/jobs", job_id, "grants", grant_id))

    async def decide_approval(
        self, approval_id: str, decision: Decision, by: str
    ) -> dict[str, Any]:
        body = {"decision": decision, "by": by}
        return await self._call("POST", _path("/api/approvals", approval_id), json=body)

    async def list_deliveries(
        self, session: str | None, state: DeliveryState | None, limit: int
    ) -> dict[str, Any]:
        params: dict[str, str | int] = {"limit": limit}
        if session is not None:
            params["session_key"] = session
        if state is not None:
            params["state"] = state.value
        return await self._call("GET", "/api/deliveries", params=params)

    async def retry_delivery(self, delivery_id: str) -> dict[str, Any]:
        return await self._call("POST", _path("/api/deliveries", delivery_id, "retry"))


async def _no_turns(trigger: Trigger) -> None:
    raise RuntimeError("the CLI's database backend runs no turns")


class DbBackend:
    """The database itself, through the same services the server's routes call, on an
    AgentCron whose store is open but whose engine is not started. A server running on the
    same database hears of these changes at once: each write announces itself
    (`store/signals.py`).
    """

    def __init__(self, url: str, *, create: bool = False, settings: Settings | None = None) -> None:
        """`url`: a SQLAlchemy URL from `config.database.db_url`; `settings`: the command
        line's (None: the environment's).
        """
        self._url, self._create = url, create
        self._settings = settings
        self._where = where(url)
        self._opened: AgentCron | None = None

    @property
    def cron(self) -> AgentCron:
        """The opened AgentCron (inside `async with`): `agentcron mcp` serves its tools."""
        return self._cron

    @property
    def _cron(self) -> AgentCron:
        if self._opened is None:
            raise CliError("the database backend is used outside `async with`")  # a bug
        return self._opened

    async def __aenter__(self) -> DbBackend:
        path = sqlite_file(self._url)
        if path is not None and not self._create and not path.exists():
            raise CliError(
                f"no database at {path}: check the path (`agentcron sessions add KEY --db "
                f"{path}` or `agentcron db upgrade --db {path}` creates one)"
            )
        config = Settings.load() if self._settings is None else self._settings
        try:
            settings = config.engine()
        except ConfigError as exc:
            raise CliError(str(exc)) from exc
        cron: AgentCron | None = None
        try:
            cron = AgentCron(url=self._url, runner=_no_turns, settings=settings, config=config)
            await cron.store.open()
        except (SQLAlchemyError, StoreUnavailableError, ArgumentError, ValueError, OSError) as exc:
            if cron is not None:
                with contextlib.suppress(Exception):
                    await cron.store.close()
            raise CliError(f"cannot open the database {self._where}: {_first_line(exc)}") from exc
        self._opened = cron
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._opened is not None:
            await self._opened.store.close()
            self._opened = None

    async def _call(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        try:
            return await fn()
        except ValidationError as exc:
            raise CliError(validation_line(exc)) from exc
        except (AgentcronError, ValueError, LookupError) as exc:
            raise CliError(str(exc)) from exc
        except SQLAlchemyError as exc:
            raise CliError(f"database error ({self._where}): {_first_line(exc)}") from exc

    async def create_session(
        self, key: str, tz: str | None, title: str | None, runner_url: str | None = None
    ) -> dict[str, Any]:
        try:
            body = SessionCreate(key=key, tz=tz, title=title, runner_url=runner_url)
        except ValidationError as exc:
            raise CliError(validation_line(exc)) from exc

        async def create() -> dict[str, Any]:
            cron = self._cron
            session = await cron.sessions.create(
                body.key, title=body.title, tz=body.tz, runner_url=body.runner_url
            )
            return views.SessionOut.of(session).json_dict()

        return await self._call(create)

    async def list_sessions(self, page: PageAsk) -> dict[str, Any]:
        sessions = self._cron.sessions
        found = await self._call(
            lambda: sessions.page(limit=page.limit, cursor=page.cursor, search=page.search)
        )
        return views.SessionsOut.of_page(found).json_dict()

    async def set_quiet_hours(self, key: str, hours: str | None) -> dict[str, Any]:
        try:
            body = SessionPatch(quiet_hours=hours)  # checked as the API's request
        except ValidationError as exc:
            raise CliError(validation_line(exc)) from exc
        session = await self._call(
            lambda: self._cron.sessions.set_quiet_hours(key, body.quiet_hours)
        )
        return views.SessionOut.of(session).json_dict()

    async def get_session(self, key: str) -> dict[str, Any]:
        detail = await self._call(lambda: self._cron.sessions.detail(key))
        return views.SessionDetailOut.of_detail(detail).json_dict()

    async def session_budget(self, key: str, caps: dict[str, Any] | None) -> dict[str, Any]:
        budget = None if caps is None else Budget.of(caps)
        await self._call(lambda: self._cron.sessions.set_budget(key, budget))
        return await self.session_spend(key, 7)

    async def session_spend(self, key: str, days: int) -> dict[str, Any]:
        spend = await self._call(lambda: self._cron.sessions.spend(key, days))
        return views.SessionSpendOut.of_spend(spend).json_dict()

    async def newest_messages(self, key: str, limit: int, cursor: str | None) -> dict[str, Any]:
        sessions = self._cron.sessions
        found = await self._call(
            lambda: sessions.transcript_page(key, before=NEWEST, limit=limit, cursor=cursor)
        )
        return views.MessagesOut.of_transcript(key, found, None).json_dict()

    async def delete_session(self, key: str, confirm: bool) -> dict[str, Any]:
        deletion = await self._call(lambda: self._cron.sessions.delete(key, confirm=confirm))
        return views.DeletionOut.of_deletion(deletion).json_dict()

    async def note(self, key: str, text: str) -> dict[str, Any]:
        note = await self._call(lambda: self._cron.sessions.note(key, text))
        return views.NoteOut.of_note(note).json_dict()

    async def send_out(self, key: str, text: str) -> dict[str, Any]:
        raise CliError(
            "sending through a session's channel needs the running server, where the channels "
            "run: use --api (or no --db) with `agentcron serve` running"
        )

    async def channels(self) -> dict[str, Any]:
        return {"channels": []}  # channels run in the server, none here

    async def add_job(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            model = JobCreate.model_validate(body)
        except ValidationError as exc:
            raise CliError(validation_line(exc)) from exc
        return views.job_view(await self._call(lambda: self._cron.jobs.create_in_session(model)))

    async def update_job(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            patch = JobPatch.model_validate(body)
        except ValidationError as exc:
            raise CliError(validation_line(exc)) from exc
        state = await self._call(lambda: self._cron.jobs.apply_patch(job_id, patch))
        return views.JobOut.of_state(state).json_dict()

    async def list_jobs(
        self, session: str | None, kind: str | None, enabled: bool | None, page: PageAsk
    ) -> dict[str, Any]:
        try:
            job_kind = None if kind is None else JobKind(kind)
        except ValueError as exc:
            kinds = ", ".join(k.value for k in JobKind)
            raise CliError(f"unknown kind {kind!r}; one of {kinds}") from exc
        jobs = self._cron.jobs
        found = await self._call(
            lambda: jobs.page(
                session_key=session,
                kind=job_kind,
                enabled=enabled,
                limit=page.limit,
                cursor=page.cursor,
            )
        )
        return views.JobsOut.of_page(found).json_dict()

    async def get_job(self, job_id: str) -> dict[str, Any]:
        detail = await self._call(lambda: self._cron.jobs.detail(job_id))
        return views.JobDetailOut.of_detail(detail).json_dict()

    async def job_spend(self, job_id: str, days: int) -> dict[str, Any]:
        spend = await self._call(lambda: self._cron.jobs.spend(job_id, days))
        return views.JobSpendOut.of_spend(spend).json_dict()

    async def job_action(self, job_id: str, action: str) -> dict[str, Any]:
        jobs = self._cron.jobs
        if action == "rm":
            deleted = await self._call(lambda: jobs.delete(job_id))
            return views.DeletedJobOut(deleted=deleted.id).json_dict()
        change = {"pause": jobs.pause, "resume": jobs.resume}[action]
        return views.job_view(await self._call(lambda: change(job_id)))

    async def renew_job(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        jobs = self._cron.jobs
        renewed = await self._call(lambda: jobs.apply_renew(job_id, JobRenew.model_validate(body)))
        return views.JobOut.of_state(renewed).json_dict()

    async def run_job(self, job_id: str) -> dict[str, Any]:
        # Written and announced: the engine of a server on this database adopts it.
        run = await self._call(lambda: self._cron.runs.run_now(job_id))
        return views.RunOut.of(run).json_dict()

    async def job_trigger(self, job_id: str, action: str) -> dict[str, Any]:
        # No server here: the path events are posted to, not a URL.
        triggers = self._cron.triggers
        if action == "disable":
            job = await self._call(lambda: triggers.disable(job_id))
            path = trigger_path(job.id)
            return views.TriggerOut(
                job_id=job.id, enabled=False, path=path, url=None, secret=None
            ).json_dict()
        change = triggers.rotate if action == "rotate" else triggers.enable
        key = await self._call(lambda: change(job_id))
        return views.TriggerOut.of_key(key, None).json_dict()

    async def list_runs(self, query: RunQuery) -> dict[str, Any]:
        runs = self._cron.runs
        found = await self._call(
            lambda: runs.page(
                job_id=query.job,
                session_key=query.session,
                states=query.states or None,
                since=query.since,
                limit=query.page.limit,
                cursor=query.page.cursor,
            )
        )
        return views.RunsOut.of_page(found).json_dict()

    async def usage(self, query: UsageQuery) -> dict[str, Any]:
        runs = self._cron.runs
        found = await self._call(
            lambda: runs.usage(
                session_key=query.session,
                job_id=query.job,
                since=query.since,
                until=query.until,
                tz=query.tz,
            )
        )
        return views.DailyUsageOut.of_usage(found).json_dict()

    async def get_run(self, run_id: str) -> dict[str, Any]:
        run = await self._call(lambda: self._cron.runs.get(run_id))
        return views.RunFullOut.of(run).json_dict()

    async def list_approvals(self, session: str | None, all: bool) -> dict[str, Any]:
        approvals = self._cron.approvals
        found = await self._call(lambda: approvals.list(session, pending_only=not all))
        return views.ApprovalsOut.of_approvals(found).json_dict()

    async def get_approval(self, approval_id: str) -> dict[str, Any]:
        return views.approval_view(await self._call(lambda: self._cron.approvals.get(approval_id)))

    async def list_grants(self, job_id: str) -> dict[str, Any]:
        found = await self._call(lambda: self._cron.approvals.grants(job_id))
        return views.GrantsOut.of_grants(found, self._cron.clock.now()).json_dict()

    async def add_grant(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        # The API's request model checks it here too: the same bounds, the same words.
        try:
            request = GrantCreate.model_validate(body)
        except ValidationError as exc:
            raise CliError(validation_line(exc)) from exc
        approvals = self._cron.approvals
        made = await self._call(lambda: approvals.grant_request(job_id, request))
        return views.GrantOut.of_grant(made, self._cron.clock.now()).json_dict()

    async def revoke_grant(self, job_id: str, grant_id: str) -> dict[str, Any]:
        gone = await self._call(lambda: self._cron.approvals.revoke(job_id, grant_id))
        return views.RevokedGrantOut(revoked=gone.id).json_dict()

    async def decide_approval(
        self, approval_id: str, decision: Decision, by: str
    ) -> dict[str, Any]:
        # On the durable record (compare-and-set): a turn waiting in a server on this
        # database reads it at its next poll and goes on.
        try:
            who = _DECIDER.validate_python(by)
        except ValidationError as exc:
            raise CliError(validation_line(exc).replace("body", "by", 1)) from exc
        approvals = self._cron.approvals
        return views.approval_view(
            await self._call(lambda: approvals.decide(approval_id, decision, by=who))
        )

    async def list_deliveries(
        self, session: str | None, state: DeliveryState | None, limit: int
    ) -> dict[str, Any]:
        deliveries = self._cron.deliveries
        found = await self._call(
            lambda: deliveries.page(session_key=session, state=state, limit=limit)
        )
        out = views.DeliveriesOut(deliveries=[views.DeliveryOut.of(d) for d in found])
        return out.json_dict()

    async def retry_delivery(self, delivery_id: str) -> dict[str, Any]:
        # Pending again on the record: the outbox of a server running that channel takes it
        # up when it looks for deliveries left behind (`Outbox._sweep`).
        deliveries = self._cron.deliveries
        return views.DeliveryOut.of(
            await self._call(lambda: deliveries.retry(delivery_id))
        ).json_dict()
