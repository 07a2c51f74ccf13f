"""The library facade: `async with AgentCron(db=..., runner=...) as cron` wires store and engine."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from agentcron.agent.runner import (
    Runner,
    SessionInfo,
    TurnCallable,
    TurnInput,
    TurnSource,
    as_runner,
)
from agentcron.agent.tool_deps import HookFunction, PolicyHook, ToolDeps, ToolLimits
from agentcron.config import (
    PG_CLAIM_AHEAD,
    UNIFIED_SESSION_KEY,
    UNIFIED_SESSION_TITLE,
    AgentSettings,
    ConfigError,
    EngineSettings,
    Settings,
    load_price_table,
)
from agentcron.config.database import store_url
from agentcron.domain.approvals import DEFAULT_APPROVAL_TIMEOUT, Policy
from agentcron.domain.events import Callback, Event, EventBus, JobAction, JobEvent
from agentcron.domain.jobs import Job
from agentcron.domain.sessions import MemoryScope, Turn
from agentcron.domain.states import TERMINAL_STATES, RunState
from agentcron.engine.isolated import Evaluator, evaluate_response
from agentcron.engine.policies import finish_job
from agentcron.engine.scheduler import Engine, make_owner
from agentcron.runtime.clock import Clock, SystemClock
from agentcron.runtime.gate import GatePolicy
from agentcron.runtime.journal import Journal
from agentcron.runtime.slots import SlotPool
from agentcron.service.alerts import Alerts
from agentcron.service.approvals import DEFAULT_REMIND_AFTER, Approvals
from agentcron.service.deliveries import Deliveries
from agentcron.service.jobs import KEEP, Jobs, Keep
from agentcron.service.runs import Runs
from agentcron.service.sessions import Sessions
from agentcron.service.system_jobs import SystemJobs
from agentcron.service.triggers import Triggers
from agentcron.store.errors import SessionNotFoundError, TurnNotFoundError
from agentcron.store.signals import SignalHub, Topic
from agentcron.store.sql import SqlStore
from agentcron.turns.lanes import Lanes

if TYPE_CHECKING:
    from pydantic_ai.models import Model

    from agentcron.agent.gate import ToolLike
    from agentcron.agent.http_runner import HttpRunner, RunnerRoutes
    from agentcron.agent.tool_sources import ToolServers
    from agentcron.config.tools import ToolConfig

__all__ = [
    "KEEP",
    "UNIFIED_MEMORY",
    "WEB_PREFIX",
    "AgentCron",
    "Deliveries",
    "Jobs",
    "Keep",
    "Runs",
    "Sessions",
    "Status",
    "SystemJobs",
]

WEB_PREFIX = "websocket:"  # the web UI's chats (threads)
_DEFAULT_CLAIM_AHEAD = EngineSettings().claim_ahead
# Unified mode: the shared automations' session and every web thread are one memory.
UNIFIED_MEMORY = MemoryScope(keys=(UNIFIED_SESSION_KEY,), prefixes=(WEB_PREFIX,))


@dataclass(frozen=True, slots=True)
class Status:
    """What this process is doing: counters since start and queue depths now."""

    fires_claimed: int
    runs_finished: Mapping[RunState, int]
    fires_waiting: int  # claimed here, turn not started
    fires_in_lanes: int  # bound fires waiting in their session's lane
    turns_waiting: int  # turns queued behind another turn of their session
    turns_active: int  # turns running now
    turns_in_runner: int  # turns inside their runner now
    awaiting_slot: int  # turns and isolated runs waiting for a slot (max_concurrent_runs)
    awaiting_approval: int  # turns and isolated runs waiting for an approval (no slot held)
    signals_heard: int = 0  # changes other processes announced that this one heard


class AgentCron:
    """agentcron as a library: a store, an engine and a runner, started and stopped together.

    Without a `runner`, turns run on your own agent over HTTP when a runner URL is set
    (`runner_url`, else `[runner] url` / $AGENTCRON_RUNNER_URL; signed with `runner_secret`,
    else `[runner] secret`), else on the built-in agent (pydantic-ai) with the scheduling tools;
    its model is `model`, else $AGENTCRON_MODEL, else the offline model. What is not given comes
    from `config` (the settings; None: the environment's): the database (`[server] db`), the
    unified mode, the price table, where named models run and the offline model's pace.
    """

    def __init__(
        self,
        db: str | Path | None = None,
        *,
        url: str | None = None,
        runner: Runner | TurnCallable | None = None,
        clock: Clock | None = None,
        settings: EngineSettings | None = None,
        model: str | Model | None = None,
        max_steps: int | None = None,
        agent: AgentSettings | None = None,
        system_prompt: str | None = None,
        prices: str | Path | Mapping[str, Mapping[str, float]] | None = None,
        tool_limits: ToolLimits | None = None,
        unified_session: bool | None = None,
        shared_chat: bool | None = None,
        evaluator: Evaluator | None = None,
        tools: Sequence[ToolLike] = (),
        tool_policy: Mapping[str, Policy] | None = None,
        approval_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
        approval_reminder: float = DEFAULT_REMIND_AFTER,
        tool_config: ToolConfig | None = None,
        runner_url: str | None = None,
        runner_secret: str | None = None,
        config: Settings | None = None,
        policy_hook: PolicyHook | HookFunction | None = None,
    ) -> None:
        if db is not None and url is not None:
            raise ValueError("give `db` (a SQLite file or a database URL) or `url`, not both")
        config = Settings.load() if config is None else config
        self.clock: Clock = clock or SystemClock()
        session_settings = config.sessions(unified=unified_session, shared_chat=shared_chat)
        self.unified_session = session_settings.unified
        self.tool_limits = tool_limits or ToolLimits()
        # Asked before the agent creates, updates or reschedules a job: the one given (an
        # object with `decide`, or a function), else `[jobs] policy_hook`, else none.
        self.policy_hook: PolicyHook | None = None
        if policy_hook is not None or config.jobs().policy_hook is not None:
            from agentcron.agent.policy_hook import PythonPolicyHook, policy_hook_from_settings

            if policy_hook is None:
                self.policy_hook = policy_hook_from_settings(config.jobs())
            elif hasattr(policy_hook, "decide"):
                self.policy_hook = policy_hook
            else:
                self.policy_hook = PythonPolicyHook(
                    policy_hook,
                    timeout=config.jobs().timeout,
                )
        # A path or a URL, checked (config.database); neither: the settings' `[server] db`.
        given = db is not None or url is not None
        self.store = SqlStore(store_url(db, url) if given else config.database(url_env=False).url)
        self.events = EventBus()
        # Gated tool calls wait here for a person; the approvals are records in the store.
        self.approvals = Approvals(
            self.store.approvals,
            self.clock,
            self.events,
            timeout=approval_timeout,
            grants=self.store.grants,
            remind_after=approval_reminder,
        )
        if runner is not None and (tools or tool_policy or tool_config):
            raise ValueError(
                "`tools`, `tool_policy` and `tool_config` are for the built-in agent: "
                "give no runner"
            )
        self._tool_names: dict[str, str] = {}  # function tools' names -> where they come from
        self.tool_servers: ToolServers | None = None  # the configured MCP servers
        # Your own agent over HTTP (its approval callback asks it), when a runner URL is set.
        self.http_runner: RunnerRoutes | None = None
        main: HttpRunner | None = None
        remote = config.runner(url=None if runner is not None else runner_url)
        secret = runner_secret or remote.secret
        if runner is None and remote.url is not None:
            if tools or tool_policy or tool_config:
                raise ValueError(
                    "`tools`, `tool_policy` and `tool_config` are for the built-in agent, "
                    "not for a runner URL"
                )
            if not secret:
                raise ConfigError(
                    "a runner URL needs the secret its requests are signed with: "
                    "`runner_secret=` or AGENTCRON_RUNNER_SECRET (`serve` keeps one)"
                )
            # Imported here: httpx and standardwebhooks are loaded only for this runner.
            from agentcron.agent.http_runner import HttpRunner

            runner = main = HttpRunner(
                remote.url,
                secret,
                timeout=remote.timeout,
                retries=remote.retries,
                concurrency=remote.concurrency,
                approvals=self.approvals.broker,
            )
        # The built-in agent's model clients (pooled connections to the model's server).
        self._close_models: Callable[[], Awaitable[None]] | None = None
        # Jobs' gates pass the tool policy the built-in agent's calls pass (the same table,
        # under `gate.command`, `gate.http`, `gate.python`); with a runner of your own there is
        # no table here: every gate is allowed.
        gate_policy = GatePolicy(approvals=self.approvals.broker)
        if runner is None:
            # Imported here: the agent framework (and its providers' SDKs) is loaded only
            # when the built-in agent is used.
            from agentcron.agent.builtin import BuiltinRunner
            from agentcron.agent.tool_sources import (
                ConfiguredTools,
                ToolServers,
                configured_tools,
                merged_policies,
                names_of,
            )
            from agentcron.agent.tools import scheduling_tools

            # Entry points are imported now (a bad one fails here); MCP servers start in start().
            configured = ConfiguredTools() if tool_config is None else configured_tools(tool_config)
            self._tool_names = names_of(
                [("agentcron", scheduling_tools()), ("library", tools)], configured.sources
            )
            self.tool_servers = ToolServers(configured.servers)
            rules = configured.rules
            policies = merged_policies(rules, tool_policy)
            gate_policy = GatePolicy(policies, self.approvals.broker, rules.approval_timeouts)
            provider = config.provider()  # where named models run, the prices, the offline pace
            runner = BuiltinRunner(
                model,
                tools=[*scheduling_tools(), *configured.tools, *tools],
                tool_policy=policies,
                approvals=self.approvals.broker,
                toolsets=configured.toolsets,
                tool_timeouts=rules.approval_timeouts,
                tool_allowed=rules.allowed if rules.sessions else None,
                deps_factory=self.tool_deps,
                max_steps=max_steps,
                settings=agent,
                provider=provider,
                system_prompt=system_prompt,
                prices=load_price_table(provider.prices if prices is None else prices),
            )
            self._close_models = runner.aclose
        # Imported here: httpx and standardwebhooks are loaded only when first used.
        from agentcron.agent.http_runner import RunnerRoutes

        # A session or a job may name its own runner URL: its turns go there (one HttpRunner
        # per URL, signed with the process's secret), the rest to the process's runner.
        routes = RunnerRoutes(
            as_runner(runner),
            secret,
            main=main,
            timeout=remote.timeout,
            retries=remote.retries,
            concurrency=remote.concurrency,
            approvals=self.approvals.broker,
        )
        # The approval callback asks the HTTP runners (any, once a secret signs them).
        self.http_runner = routes if secret else None
        self.runner = routes.default  # the process's runner
        settings = settings or EngineSettings()
        if self.store.dialect == "postgresql" and settings.claim_ahead == _DEFAULT_CLAIM_AHEAD:
            settings = replace(settings, claim_ahead=PG_CLAIM_AHEAD)
        self.settings = settings
        # One group commit for every write of the fire -> turn path, one pool of turn slots.
        self.journal = Journal(
            self.store,
            lambda job, outcome: finish_job(job, outcome, settings),
            max_batch=settings.flush_batch,
        )
        slots = SlotPool(settings.max_concurrent_runs)  # turns and isolated runs alike
        owner = make_owner()
        self.lanes = Lanes(
            self.store,
            self.journal,
            routes,
            self.clock,
            owner=owner,
            bus=self.events,
            slots=slots,
            settings=settings,
            memory_scope=self.memory_scope if self.unified_session else None,
            shared_chat=session_settings.shared_chat,
            gate_policy=gate_policy,
        )
        self.engine = Engine(
            self.store,
            routes,
            journal=self.journal,
            turns=self.lanes,
            slots=slots,
            bus=self.events,
            clock=self.clock,
            settings=settings,
            owner=owner,
            evaluator=evaluator or evaluate_response,
            deliver=self.lanes.posts.deliver,
            memory=self.lanes.history_of if self.lanes.keeps_history else None,
            gate_policy=gate_policy,
        )
        # With each periodic reap: approvals whose turn was cut off elsewhere expire.
        self.engine.reapers.append(self.approvals.reap)
        self._stopping = False
        store = self.store
        self.runs = Runs(
            store,
            self.engine.run_waiters,
            stopping=lambda: self._stopping,
            clock=self.clock,
            adopt=self.engine.adopt_soon,
            catalog=store,
            sessions=store.sessions,
        )
        self.jobs = Jobs(
            store,
            self.journal,
            self.runs,
            store,
            self.clock,
            wake=self.engine.due_at,
            publish=self.publish_job,
            owner_of=self.job_owner,
            max_jobs=lambda: self.settings.max_jobs,
            retention=lambda: self.settings.retention_age,
            min_interval=lambda: self.settings.min_interval,
            waiting=self.approvals.waiting_of_job,
            gates=lambda: self.settings.gates,
            tool_names=self.tool_names,
        )
        self.engine.reapers.append(self.jobs.sweep_finished)
        # With each periodic reap: jobs gone silent, failing or about to end, once per episode.
        self.alerts = Alerts(store, self.clock, self.publish, lambda: self.settings)
        self.engine.reapers.append(self.alerts.sweep)
        self.sessions = Sessions(
            store.sessions,
            self.lanes,
            self.jobs,
            store,
            self.clock,
            post=self.lanes.posts.post,
            publish=self.publish,
            jobs_per_session=store.jobs_per_session,
            owner_of=self.job_owner,
            stopping=lambda: self._stopping,
            end_approvals=self.approvals.end_session,
            runs=self.runs,
        )
        self.system = SystemJobs(self.jobs, self.engine.system_handlers, self.clock)
        self.deliveries = Deliveries(store.deliveries, self.clock, self.publish)
        self.triggers = Triggers(
            store, store, self.clock, adopt=self.engine.adopt_soon, publish=self.publish_job
        )
        # Changes other processes make on the database, acted on here at once.
        self._hear(store.signals)

    def tool_names(self) -> list[str] | None:
        """The names a job's tool allow-list may use: the built-in agent's function tools,
        and each MCP server's tools (their names once started, else its `prefix_*`); None
        with a runner of your own (its tools are not known here).
        """
        if self.tool_servers is None:
            return None
        names = list(self._tool_names)
        if self.tool_servers.names:  # started: every tool by name
            return names + list(self.tool_servers.names)
        for server in self.tool_servers.servers:
            names.append(f"{server.prefix}_*" if server.prefix else "*")
        return names

    def _hear(self, signals: SignalHub) -> None:
        """What this process does when another process's change is announced: re-read the
        schedule (a job changed), adopt released fires, start turns waiting for a session
        let go elsewhere, wake tool calls whose approval was decided elsewhere.
        """
        engine, lanes, broker = self.engine, self.lanes, self.approvals.broker
        signals.subscribe(Topic.JOBS, lambda _t, _k: engine.wake())
        signals.subscribe(Topic.RUNS, lambda _t, keys: engine.adopt_soon(recover=keys is not None))
        signals.subscribe(Topic.SESSIONS, lambda _t, keys: lanes.sessions_freed(keys))
        signals.subscribe(Topic.APPROVALS, lambda _t, keys: broker.recheck(keys))

    def subscribe(
        self, callback: Callback, types: Iterable[type[Event]] | None = None
    ) -> Callable[[], None]:
        """Call `callback(event)` for every event (or those of `types`, classes from
        `agentcron.domain.events`); returns a function that unsubscribes.
        """
        return self.events.subscribe(callback, types)

    async def publish(self, event: Event) -> None:
        """Send an event to the subscribers (WebSocket clients, channels, metrics)."""
        await self.events.publish(event)

    async def publish_job(self, action: JobAction, job: Job) -> None:
        """A job was created, changed or deleted."""
        await self.publish(
            JobEvent(
                session_key=job.session_key or "",
                action=action,
                job_id=job.id,
                kind=job.kind,
                job=job,
            )
        )

    @property
    def running(self) -> bool:
        """The engine is up (started, not stopped, not crashed)."""
        return self.engine.running

    @property
    def stopping(self) -> bool:
        """A stop has begun (`begin_stop` or `close`)."""
        return self._stopping

    def begin_stop(self) -> None:
        """Say that a stop is coming (a server calls this on SIGINT, before it waits for its
        open requests): callers waiting on a run or a turn get it back as it is now.
        """
        self._stopping = True
        self.journal.begin_stop()  # an unreachable database is waited for a few seconds more
        self.engine.run_waiters.notify_all()
        self.lanes.turn_waiters.notify_all()

    def status(self) -> Status:
        """Counters and queue depths of this process, for metrics."""
        engine, lanes, slots = self.engine, self.lanes, self.engine.slots
        return Status(
            fires_claimed=engine.stats["claimed"],
            runs_finished={s: engine.stats[s.value] for s in TERMINAL_STATES},
            fires_waiting=engine.waiting_runs,
            fires_in_lanes=lanes.parked,
            turns_waiting=lanes.queued_turns,
            turns_active=lanes.active_turns,
            turns_in_runner=slots.turns.in_runner,
            awaiting_slot=slots.awaiting_slot,
            awaiting_approval=slots.awaiting_approval,
            signals_heard=self.store.signals.heard,
        )

    def job_owner(self, session_key: str) -> str:
        """The session that automations created from `session_key` bind to: itself, or in
        unified mode the shared `unified:default` for web chats (`websocket:*`).
        """
        if self.unified_session and session_key.startswith(WEB_PREFIX):
            return UNIFIED_SESSION_KEY
        return session_key

    def memory_scope(self, session_key: str) -> MemoryScope | None:
        """The sessions whose transcripts are `session_key`'s memory: in unified mode, for a
        web chat (`websocket:*`) or `unified:default`, all of them as one timeline (the
        shared automations' fires and every thread); else None, the session alone.
        """
        if self.unified_session and (
            session_key == UNIFIED_SESSION_KEY or session_key.startswith(WEB_PREFIX)
        ):
            return UNIFIED_MEMORY
        return None

    def tool_deps(self, session: SessionInfo, turn: TurnInput) -> ToolDeps:
        """What the scheduling tools know about a turn: its session, time and zone (also for a
        runner of your own that registers `agentcron.agent.tools.scheduling_tools()`).
        """
        return ToolDeps(
            jobs=self.jobs,
            session_key=session.key,
            now=turn.now or self.clock.now(),
            tz=session.tz,
            in_scheduled_turn=turn.source in (TurnSource.AUTOMATION, TurnSource.RECALL),
            limits=self.tool_limits,
            automation_key=self.job_owner(session.key),
            turn_id=turn.turn_id,
            recall_scope=self.memory_scope(session.key),
            sessions=self.sessions,
            run_id=None if turn.trigger is None else turn.trigger.run_id,
            job_id=None if turn.trigger is None else turn.trigger.job_id,
            policy=self.policy_hook,
        )

    async def session_tool_deps(self, key: str) -> ToolDeps:
        """What the scheduling tools know when called from outside a turn for session `key`
        (agentcron as an MCP server): the session's zone, the time now, and, while the turn
        holding the session (its lane's lease) is a scheduled one, that the call is inside it,
        so its guard rails hold for an agent that calls in during a fire.
        SessionNotFoundError when there is no such session.
        """
        session = await self.sessions.get(key)
        scope = self.memory_scope(key)
        current: Turn | None = None
        with contextlib.suppress(SessionNotFoundError, TurnNotFoundError):  # no turn holds it
            lane = session if scope is None else await self.sessions.get(scope.lane_of(key))
            if lane.turn_id is not None and lane.turn_owner is not None:
                turn = await self.sessions.turn(lane.turn_id)
                current = None if turn.state.terminal else turn
        info = SessionInfo(key=session.key, channel=session.channel, tz=session.tz)
        asked = TurnInput(
            turn_id=current.id if current else "",
            source=current.source if current else TurnSource.USER,
            prompt="",
        )
        deps = self.tool_deps(info, asked)
        return deps if current else replace(deps, turn_id=None)

    async def start(self) -> None:
        """Open the store, start the configured MCP servers (ToolConfigError when one does not
        start, or a tool name is taken twice), then the engine.
        """
        await self.store.open()
        if self.unified_session:
            # The unified memory's lane session: its turn lease serializes the threads' turns
            # across processes (a missing one would serialize them only within each process).
            await self.store.sessions.ensure_session(
                UNIFIED_SESSION_KEY, self.clock.now(), title=UNIFIED_SESSION_TITLE
            )
        await self.store.signals.start()
        if self.tool_servers is not None:
            try:
                await self.tool_servers.start(self._tool_names)
            except BaseException:
                await self.store.signals.stop()
                await self.store.close()
                raise
        try:
            await self.engine.start()
        except BaseException:
            if self.tool_servers is not None:
                await self.tool_servers.stop()  # no server subprocess outlives a failed start
            raise
        # After turn recovery (in the engine's start): approvals whose turn was cut off by a
        # stop or a crash expire ("restart"); nothing they asked for runs later.
        await self.approvals.recover(keep=self.settings.retention_age)

    async def close(self, grace: float | None = None) -> None:
        """Stop the engine (running turns get `grace` seconds to finish), the MCP servers, the
        built-in agent's model clients and the store.
        """
        self.begin_stop()
        try:
            await self.engine.stop(grace)
        finally:
            try:
                if self.tool_servers is not None:
                    await self.tool_servers.stop()
                if self._close_models is not None:
                    await self._close_models()
            finally:
                await self.store.signals.stop()
                await self.store.close()

    async def __aenter__(self) -> AgentCron:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
