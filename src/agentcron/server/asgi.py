"""The FastAPI application: /api (token), /hooks (own token), health, metrics, WS, web UI."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException, WebSocket, status
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.routing import Route

from agentcron.app import AgentCron
from agentcron.approval_links import ApprovalLinks
from agentcron.channels.manager import ChannelManager
from agentcron.server import errors, fire
from agentcron.server.auth import require_token
from agentcron.server.deps import clean_url
from agentcron.server.errors import CHANGE, answers
from agentcron.server.mcp import McpEndpoint
from agentcron.server.metrics import Metrics, RelayCollector
from agentcron.server.middleware import BodyLimit, SessionKeyPath
from agentcron.server.routes import (
    approvals,
    deliveries,
    health,
    hooks,
    jobs,
    runner,
    runs,
    sessions,
    triggers,
)
from agentcron.server.ws import Hub
from agentcron.version import __version__
from agentcron.wake.provider import LocalWake, WakeProvider

DOCS_ASSETS = "/docs-assets"  # Swagger UI's and ReDoc's files, served by us (not a CDN)


def webui_dir() -> Path:
    return Path(str(resources.files("agentcron").joinpath("webui")))


Hook = Callable[[], Awaitable[None]]


def create_app(
    cron: AgentCron,
    *,
    token: str,
    hook_token: str | None = None,
    on_start: Sequence[Hook] = (),
    on_stop: Sequence[Hook] = (),
    channels: ChannelManager | None = None,
    wake: WakeProvider | None = None,
    relay_events: bool = False,
) -> FastAPI:
    """The server for `cron`. The hooks run in the app's lifespan (`agentcron serve` starts and
    stops AgentCron and the channels there); without them the caller owns AgentCron's life.

    `relay_events` (`serve`): on PostgreSQL, the WebSocket clients of every replica on the
    database see the events of all of them (`server/relay_events.py`; its sender stops with
    the lifespan). Create the app before AgentCron starts: the relay is then heard at once.
    """
    hub: Hub | None = None
    metrics = Metrics(cron)
    mcp = McpEndpoint(cron, token)  # /mcp: the scheduling tools over MCP, bound to a session

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for start in on_start:
            await start()
        try:
            async with mcp.running():
                yield
        finally:
            try:
                if hub is not None and hub.relay is None:
                    hub.close()
                metrics.close()
                for stop in on_stop:
                    await stop()
            finally:
                # With a relay the hub listens through the stop hooks: the ends of the turns
                # a graceful stop waits for reach the other replicas (until the signals stop).
                if hub is not None and hub.relay is not None:
                    hub.close()
                    await hub.relay.close()

    # /docs and /redoc load Swagger UI's and ReDoc's scripts from us (DOCS_ASSETS, files the
    # fastapi-offline package ships), never from a CDN: the API docs work offline.
    app = FastAPIOffline(
        static_url=DOCS_ASSETS,
        title="agentcron",
        version=__version__,
        summary="Cron for AI agent sessions: scheduled jobs are turns of their chat session.",
        lifespan=lifespan,
    )
    app.state.cron = cron
    app.state.token = token
    app.state.hook_token = hook_token
    app.state.metrics = metrics
    app.state.channels = channels  # for GET /api/channels; None = no channels
    # Decision URLs (POST /api/approvals/{id}/decide): checked with the links the channels
    # make them with, else with links keyed by the API token (what `serve` gives the channels).
    links = channels.approval_links if channels is not None else None
    app.state.approval_links = links or ApprovalLinks(token)
    app.state.wake = wake = wake or LocalWake()  # what wakes the engine (README: Managed wake)
    metrics.registry.register(fire.WakeCollector(wake))
    hub = Hub(cron, token)
    if relay_events and cron.store.signals.dialect == "postgresql":
        hub.relay_through(cron.store.signals)  # NOTIFY: SQLite replicas share no channel
    if hub.relay is not None:
        metrics.registry.register(RelayCollector(hub.relay))
    app.state.hub = hub
    errors.install(app)
    app.add_middleware(SessionKeyPath)
    app.add_middleware(BodyLimit)  # outermost: a too large body is refused before anything
    # The routes declare their answers (the OpenAPI document is generated from them); a
    # guard's errors are declared where it is added: the token's 401, a NUL's 422.
    guarded = [Depends(require_token), Depends(clean_url)]
    routers = (
        sessions.router,
        jobs.router,
        runs.router,
        deliveries.router,
        approvals.router,
        runner.schema_router,
        triggers.router,
    )
    for router in routers:
        app.include_router(router, dependencies=guarded, responses=answers(401, 422))
    app.include_router(approvals.capability_router, dependencies=[Depends(clean_url)])
    app.include_router(hooks.router, dependencies=[Depends(clean_url)])
    # A job's events: the signature with its own trigger secret is the auth, not a token.
    app.include_router(triggers.event_router, dependencies=[Depends(clean_url)])
    # The runner's approval callback: the runner secret is its token, not the API's.
    app.include_router(runner.router, dependencies=[Depends(clean_url)])
    # its own token (the relay's signed JWT), 404 while managed wake is off
    app.include_router(fire.router, responses=answers(401, 404, 422, *CHANGE))
    app.include_router(health.router)
    # An ASGI app of its own (the MCP SDK's transport), with its own auth: server/mcp.py.
    app.router.routes.append(Route("/mcp", mcp, include_in_schema=False))

    @app.websocket("/api/ws")
    async def stream(socket: WebSocket) -> None:
        await hub.serve(socket)

    @app.api_route(
        "/api/{rest:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        include_in_schema=False,
    )
    async def no_such_api_path(rest: str) -> None:
        """A JSON 404 for /api paths no route has (not the web UI's 404 or 405)."""
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"no API path /api/{rest} (see /docs; a session key with `/` needs it as %2F)",
        )

    # Last: the UI owns every path the API does not (no build step, files from the package).
    app.mount("/", StaticFiles(directory=webui_dir(), html=True), name="webui")
    return app
