"""`agentcron serve`: one process with the engine, lanes, runner, channels, API, stream and UI."""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import uvicorn
from fastapi import FastAPI
from pydantic_ai.models import Model

from agentcron.app import AgentCron
from agentcron.approval_links import ApprovalLinks, RedactApprovalTokens
from agentcron.config import Settings
from agentcron.config.database import describe, store_url
from agentcron.config.server import DEFAULT_PORT, local_zone
from agentcron.config.tools import ToolConfigError, load
from agentcron.errors import AgentcronError
from agentcron.limits import MAX_BODY_BYTES
from agentcron.runtime.clock import Clock
from agentcron.server.asgi import Hook, create_app
from agentcron.server.auth import HOOK_TOKEN_ENV, HOOK_TOKEN_FILE, load_or_create_token
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.signals import Topic
from agentcron.tokens import RUNNER_SECRET_ENV, RUNNER_SECRET_FILE, new_runner_secret
from agentcron.wake.arms import ArmClient
from agentcron.wake.provider import ManagedWake, resolve
from agentcron.wake.verify import FireVerifier

log = logging.getLogger(__name__)
DEMO_SENTENCE = "remind me in 30 seconds to stretch"
# One demo chat per database: `serve --demo` starts it once, a later start finds it there.
DEMO_KEY = "websocket:demo"
DEMO_TITLE = "Demo: a reminder from a sentence"


class ListenError(AgentcronError):
    """`serve` cannot listen on its address (the port is taken, the host is not this one's)."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port`, before anything else `serve` does: a busy port is
    one clear error before a URL, a token or a chat exists. uvicorn serves on it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn binds
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = (
            ": another server (agentcron serve?) listens there; stop it or pick another --port"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    return sock


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"  # local only unless asked: the API can make the agent act
    port: int = DEFAULT_PORT
    db: Path | None = None
    url: str | None = None  # a SQLAlchemy URL (PostgreSQL) instead of the SQLite file
    home: Path | None = None  # where tokens live (default: the data dir)
    model: str | Model | None = None  # a name ("openai:gpt-4.1-mini", "offline") or a model
    runner_url: str | None = None  # your own agent over HTTP (--runner-url; None: the settings')
    unified_session: bool | None = None
    log_level: str = "info"
    # Say DEMO_SENTENCE in a new session at start-up: the offline agent schedules a reminder
    # that arrives as a turn of that session while the server runs.
    demo: bool = False
    wake: str | None = None  # local or managed (--wake); None = $AGENTCRON_WAKE, else local
    # A managed wake's own arm client / fire verifier, instead of those `wake.service` /
    # `wake.verifier` name (the relay's or seed 002's).
    wake_arms: ArmClient | None = None
    fire_verifier: FireVerifier | None = None
    # The TOML file whose [tools] table gives the agent's tools (the configuration file, or
    # the file of --tools / $AGENTCRON_TOOLS_FILE); None = no configured tools.
    tools: Path | None = None
    # Every other setting (the environment over the configuration file); None = the
    # environment's, read when the server is built.
    settings: Settings | None = None
    extra_start: list[Hook] = field(default_factory=list)
    extra_stop: list[Hook] = field(default_factory=list)


@dataclass
class Server:
    app: FastAPI
    cron: AgentCron
    token: str
    hook_token: str
    where: str  # the database, for the start-up lines
    # What stopped the start (the app's lifespan failed): `run` raises the first one.
    start_errors: list[ToolConfigError] = field(default_factory=list)


def build(options: ServeOptions, *, clock: Clock | None = None) -> Server:
    """The app and its AgentCron, not started: the app's lifespan starts and stops them."""
    settings = Settings.load() if options.settings is None else options.settings
    data = settings.data()
    home = options.home or data.dir
    token = load_or_create_token(home, given=data.token)
    hook_token = load_or_create_token(home, HOOK_TOKEN_FILE, HOOK_TOKEN_ENV, given=data.hook_token)
    # Neither: $AGENTCRON_DATABASE_URL, else $AGENTCRON_DB (a path or a URL), else the file.
    given = options.db or options.url
    url = store_url(options.db, options.url) if given else settings.database().url
    # Read and imported here (a bad file or entry point stops `serve` before it binds); the
    # MCP servers start with the app (a server that does not start stops it: ToolConfigError).
    tool_config = load(options.tools, settings.values) if options.tools is not None else None
    remote = settings.runner(url=options.runner_url)
    # Your own agent (the runner URL, or a session's or a job's own) checks the turns'
    # signatures with this secret (created in the data dir on first use, like the tokens;
    # `agentcron token --runner`).
    runner_secret = load_or_create_token(
        home, RUNNER_SECRET_FILE, RUNNER_SECRET_ENV, given=remote.secret, make=new_runner_secret
    )
    if remote.url is not None:
        tool_config = None  # the [tools] table is the built-in agent's
    cron = AgentCron(
        url=url,
        clock=clock,
        model=options.model,
        unified_session=options.unified_session,
        settings=settings.engine(),
        agent=settings.agent(),
        tool_config=tool_config if tool_config is not None and not tool_config.empty else None,
        runner_url=remote.url,
        runner_secret=runner_secret,
        config=settings,
    )
    from agentcron.channels import ChannelManager, WebhookChannel, channels_from_settings

    # The webhook's decision URLs: <AGENTCRON_PUBLIC_URL>/api/approvals/{id}/decide?token=...,
    # their tokens keyed by the API token (the app checks them with the same links).
    bound = settings.server(host=options.host, port=options.port, log_level=options.log_level)
    links = ApprovalLinks(token, bound.public_url)
    channels = channels_from_settings(settings.channels())
    if links.public_url is None and any(isinstance(c, WebhookChannel) for c in channels):
        log.info(
            "webhook approval requests carry no decision_url: set AGENTCRON_PUBLIC_URL to "
            "this server's base URL as the receiver reaches it"
        )
    manager = ChannelManager(cron, channels, approval_links=links)
    wake = resolve(
        settings.wake(provider=options.wake),
        engine=cron.engine,
        catalog=cron.store,
        runs=cron.store,
        subscribe=cron.subscribe,
        clock=cron.clock,
        arms=options.wake_arms,
        verifier=options.fire_verifier,
    )

    if isinstance(wake, ManagedWake):
        # A job changed by another process (the CLI, another replica) moves its arm too.
        cron.store.signals.subscribe(Topic.JOBS, lambda _topic, _keys: wake.poke())

    async def start() -> None:
        if isinstance(wake, ManagedWake):
            wake.prepare()  # no timer: fires come from the wake service
        try:
            await cron.start()
        except ToolConfigError as exc:
            start_errors.append(exc)  # `run` says it in one line (uvicorn's traceback dropped)
            raise
        await wake.start()
        await manager.start()
        # What start-up loaded (modules, the agent framework) lives as long as the process: out
        # of the collector's way, a full collection no longer pauses a fire for ~100 ms.
        gc.collect()
        gc.freeze()
        if options.demo:
            await _start_demo(cron)

    async def stop() -> None:
        try:
            await wake.stop()
            await manager.stop()
        finally:
            await cron.close()

    start_errors: list[ToolConfigError] = []
    app = create_app(
        cron,
        token=token,
        hook_token=hook_token,
        on_start=[start, *options.extra_start],
        on_stop=[*options.extra_stop, stop],
        channels=manager,
        wake=wake,
        relay_events=True,  # PostgreSQL: every replica's clients see every replica's turns
    )
    where = describe(url)  # the backend, and the URL without its password
    return Server(app, cron, token, hook_token, where, start_errors)


async def _start_demo(cron: AgentCron) -> None:
    """The demo chat, once per database: a later `serve --demo` finds it and adds nothing."""
    try:
        await cron.sessions.get(DEMO_KEY)
    except SessionNotFoundError:
        # The person at this machine reads the demo's times in its zone ($TZ, else the
        # machine's), as a web chat takes the browser's.
        await cron.sessions.create(DEMO_KEY, title=DEMO_TITLE, tz=local_zone())
        await cron.sessions.send(DEMO_KEY, DEMO_SENTENCE)
        log.info("demo session %s: said %r", DEMO_KEY, DEMO_SENTENCE)
    else:
        log.info("demo session %s: there from an earlier start", DEMO_KEY)


def run(options: ServeOptions, echo: Callable[[str], None]) -> None:
    """Serve until interrupted (Ctrl-C stops gracefully: running turns get time to finish).
    The address is bound first: a busy port is a `ListenError` before anything is created.
    """
    sock = listen(options.host, options.port)
    with contextlib.closing(sock):
        _serve(options, echo, sock)


def _serve(options: ServeOptions, echo: Callable[[str], None], sock: socket.socket) -> None:
    base = f"http://{options.host}:{options.port}/"

    async def announce() -> None:
        echo(f"agentcron serving at {base}  (open it and log in with the token)")
        echo(f"database: {server.where}; runner: {model}{f' ({model_id})' if model_id else ''}")
        echo(f"API docs: {base}docs; inbound hook token: `agentcron token --hook`")
        if options.demo:
            echo(
                f"demo: the chat “{DEMO_TITLE}” says {DEMO_SENTENCE!r} (once per database); "
                "the reminder arrives as its turn"
            )
        wake = server.app.state.wake.status()
        why = f" ({wake['reason']})" if wake.get("reason") else ""
        echo(f"wake: {wake['provider']}{why}")
        servers = server.cron.tool_servers
        counts = Counter(servers.names.values() if servers is not None else ())
        if set(counts) - {"agentcron"}:  # configured tools: say how many and from where
            echo(
                f"tools: {counts.total()} ("
                + ", ".join(f"{n} {s}" for s, n in counts.items())
                + f") from {options.tools}; `agentcron tools list` shows them"
            )
        echo(f"token: {server.token}")

    options.extra_start.append(announce)  # after AgentCron and the channels started
    server = build(options)
    model = server.cron.runner.__class__.__name__
    model_id = getattr(server.cron.runner, "model_id", None)
    config = uvicorn.Config(
        server.app,
        host=options.host,
        port=options.port,
        log_level=options.log_level,
        lifespan="on",
        ws_max_size=MAX_BODY_BYTES,  # a WebSocket frame: the same limit as a request body
    )
    # A decision URL's token is in its query string: not in the access log (after the Config,
    # which configures uvicorn's loggers).
    logging.getLogger("uvicorn.access").addFilter(RedactApprovalTokens())
    # uvicorn re-raises the signal it stopped on once it is done; the stop was graceful.
    quiet = _OwnStartErrors(server.start_errors)
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(quiet)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            _Uvicorn(config, server.cron).run(sockets=[sock])
    except SystemExit:  # uvicorn's exit after a failed start
        if not server.start_errors:
            raise
    finally:
        uvicorn_log.removeFilter(quiet)
    if server.start_errors:  # the command's error, one line (`serve` exits 2)
        raise server.start_errors[0]


class _OwnStartErrors(logging.Filter):
    """Drops uvicorn's traceback of a start that failed with a ToolConfigError: `run` says
    that error in one line instead.
    """

    def __init__(self, errors: list[ToolConfigError]) -> None:
        super().__init__()
        self._errors = errors

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self._errors and "ToolConfigError" in record.getMessage())


class _Uvicorn(uvicorn.Server):
    """uvicorn waits for open requests before it stops the app: on SIGINT/SIGTERM, first tell
    AgentCron a stop is coming, so that long polls (`?wait=`) return at once.
    """

    def __init__(self, config: uvicorn.Config, cron: AgentCron) -> None:
        super().__init__(config)
        self._cron = cron

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._cron.begin_stop()
        super().handle_exit(sig, frame)
