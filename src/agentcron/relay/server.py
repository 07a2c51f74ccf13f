"""`agentcron relay serve`: the relay's HTTP API on its own AgentCron.

    POST /provision   {job_id, fire_at, callback_url, dedup_key?} -> {schedule_id}   (agent)
    POST /cancel      {job_id}                                    -> {ok: true}      (agent)
    GET  /list                                                    -> {arms: [...]}   (agent)
    GET  /jwks.json   (also /.well-known/jwks.json): the public keys of the fire tokens
    GET  /healthz, /readyz, /metrics

An agent authenticates with its credential (`agentcron relay add-agent`) and sees only its
own arms. A provision whose callback_url is not of an origin allowed for the agent, or whose
host resolves to a private address (unless `--allow-private-callbacks`), is a 403.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import AwareDatetime, BaseModel, Field

from agentcron.app import AgentCron
from agentcron.config import EngineSettings, Settings
from agentcron.config.database import describe, store_url
from agentcron.config.relay import ALLOW_PRIVATE_ENV, DEFAULT_RELAY_PORT
from agentcron.relay.agents import Agent, AgentRegistry
from agentcron.relay.callbacks import CallbackGuard, CallbackRefusedError
from agentcron.relay.service import Relay
from agentcron.relay.signing_keys import SigningKeys
from agentcron.server import errors
from agentcron.server.auth import bearer
from agentcron.version import __version__

log = logging.getLogger(__name__)

DEFAULT_PORT = DEFAULT_RELAY_PORT
_JOB_ID = r"^[^\s/]{1,200}$"


async def _caller(request: Request) -> Agent:
    """The agent whose credential the request carries, else 401."""
    registry: AgentRegistry = request.app.state.agents
    found = registry.authenticate(bearer(request))
    if found is None:
        raise HTTPException(
            401,
            detail="send 'Authorization: Bearer <agent credential>' "
            "(`agentcron relay add-agent NAME --audience AUD` creates one)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return found


Caller = Annotated[Agent, Depends(_caller)]


class ProvisionBody(BaseModel):
    job_id: str = Field(pattern=_JOB_ID)
    fire_at: AwareDatetime
    callback_url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2000)
    dedup_key: str | None = Field(default=None, max_length=500)


class CancelBody(BaseModel):
    job_id: str = Field(pattern=_JOB_ID)


@dataclass
class RelayOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    home: Path | None = None
    db: Path | None = None
    url: str | None = None
    issuer: str | None = None
    deadline: float | None = None
    log_level: str = "info"
    allow_private: bool | None = None  # None: $AGENTCRON_RELAY_ALLOW_PRIVATE
    # The rest (the environment over the configuration file); None = the environment's.
    settings: Settings | None = None


@dataclass
class RelayServer:
    app: FastAPI
    relay: Relay
    cron: AgentCron
    keys: SigningKeys
    agents: AgentRegistry
    issuer: str
    where: str


class _RelayCollector(Collector):
    def __init__(self, relay: Relay, arms: Callable[[], int]) -> None:
        self._relay, self._arms = relay, arms

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        attempts = CounterMetricFamily(
            "agentcron_relay_delivery_attempts", "Fire POSTs to agents", labels=["result"]
        )
        for key, count in sorted(self._relay.attempts.items()):
            attempts.add_metric([key], count)
        yield attempts
        ends = CounterMetricFamily(
            "agentcron_relay_deliveries", "Arms ended: delivered or gave up", labels=["result"]
        )
        for key, count in sorted(self._relay.deliveries.items()):
            ends.add_metric([key], count)
        yield ends
        arms = GaugeMetricFamily("agentcron_relay_arms", "Arms held (all agents)")
        arms.add_metric([], self._arms())
        yield arms


def build(
    options: RelayOptions, on_ready: Callable[[], Awaitable[None]] | None = None
) -> RelayServer:
    config = Settings.load() if options.settings is None else options.settings
    settings = config.relay(
        host=options.host,
        port=options.port,
        home=options.home,
        issuer=options.issuer,
        deadline=options.deadline,
        allow_private=options.allow_private,
    )
    home, issuer, deadline = settings.home, settings.issuer, settings.deadline
    keys = SigningKeys(home / "keys")
    agents = AgentRegistry(home)
    guard = CallbackGuard(allow_private=settings.allow_private)
    relay = Relay(keys, issuer=issuer, deadline=deadline, guard=guard, agent_of=agents.get)
    # Neither: $AGENTCRON_RELAY_DB (a path or a URL, as --db is), else relay.db in its home.
    url = store_url(options.db, options.url) if options.url or options.db else settings.database()
    engine = EngineSettings(
        max_jobs=None,  # one arm per job of every agent
        max_concurrent_runs=256,  # deliveries wait on the network, not the CPU
        turn_timeout=deadline + 60,
        history_window=0,
        stop_timeout=5.0,  # a delivery cut by a stop is recorded interrupted (never re-sent)
    )
    # Its file made 0600/0700.
    cron = AgentCron(url=url, runner=relay.deliver, settings=engine, config=config)
    relay.cron = cron
    arm_count = {"n": 0}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        keys.load_or_create()
        await cron.start()
        await relay.recover()
        if on_ready is not None:
            await on_ready()
        try:
            yield
        finally:
            await cron.close()

    app = FastAPI(title="agentcron relay", version=__version__, lifespan=lifespan)
    errors.install(app)
    registry = CollectorRegistry()
    registry.register(_RelayCollector(relay, lambda: arm_count["n"]))

    app.state.agents = agents

    @app.post("/provision")
    async def provision(body: ProvisionBody, caller: Caller) -> dict[str, str]:
        wire = body.fire_at.isoformat(timespec="seconds")
        if body.dedup_key is not None and body.dedup_key.split(":", 1)[0] != body.job_id:
            raise HTTPException(422, detail="dedup_key must be '{job_id}:{fire_at}'")
        try:
            schedule_id = await relay.provision(
                caller, body.job_id, body.fire_at, body.callback_url
            )
        except CallbackRefusedError as exc:
            log.warning("provision refused for %s: %s", caller.name, exc)
            raise HTTPException(403, detail=str(exc)) from None
        log.debug("provisioned %s:%s at %s", caller.name, body.job_id, wire)
        return {"schedule_id": schedule_id}

    @app.post("/cancel")
    async def cancel(body: CancelBody, caller: Caller) -> dict[str, bool]:
        await relay.cancel(caller, body.job_id)
        return {"ok": True}

    @app.get("/list")
    async def list_arms(caller: Caller) -> dict[str, Any]:
        return {"arms": [a.json() for a in await relay.list(caller)]}

    @app.get("/jwks.json")
    @app.get("/.well-known/jwks.json")
    async def jwks() -> JSONResponse:
        return JSONResponse(keys.jwks(), headers={"Cache-Control": "max-age=300"})

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ready = cron.running
        body = {"status": "ready" if ready else "not ready", "issuer": issuer}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        arm_count["n"] = await cron.jobs.count()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    where = describe(url)
    return RelayServer(app, relay, cron, keys, agents, issuer, where)


def run(options: RelayOptions, echo: Callable[[str], None]) -> None:
    """Serve the relay until interrupted."""
    base = f"http://{options.host}:{options.port}"

    async def announce() -> None:
        echo(f"agentcron relay serving at {base}/  (issuer {server.issuer})")
        echo(f"jwks: {base}/jwks.json; database: {server.where}")
        names = ", ".join(a.name for a in server.agents.all()) or "none yet"
        echo(
            f"agents: {names}  (add one: agentcron relay add-agent NAME --audience AUD "
            "--allow-origin URL)"
        )
        if server.relay.guard.allow_private:
            echo(
                "private callbacks allowed (--allow-private-callbacks or "
                f"{ALLOW_PRIVATE_ENV}): agents may be called back on loopback and private "
                "addresses"
            )
        echo("relay ready")

    server = build(options, announce)
    config = uvicorn.Config(
        server.app, host=options.host, port=options.port, log_level=options.log_level
    )
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run()
