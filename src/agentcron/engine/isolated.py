"""Isolated runs: the fires that are not session turns (system jobs, delivery jobs), run to the end.

A delivery job is an `agent_turn` job without `session_key`, or with delivery fields
(`deliver`/`channel`/`to`): it runs isolated, and its result goes through an evaluate step and,
when it passes, to the job's target (`channel`/`to`). A delivery job's gate (domain/gates.py)
asks first, at the fire's time and holding no slot, as a session turn's does: a "no" ends the
run `skipped` (reason `gate`; a `notice` gate sends one short notice to the target), a gate
error ends it `failed`, a `no_llm` gate ends it on its answer; a "yes" hands the gate's output
to the runner below the task. The run's `delivery` keeps what the gate said (`gate`). Its
memory is its own session `cron:{job_id}` (seed 001): the run reads its history from there
and saves the exchange there (when the runner keeps history at all). A system job
(`system_event`: heartbeat, dream, ...) runs through the handler registered for its name.
Neither writes into a user's session as a turn; session-turn fires never come here.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentcron.agent.runner import (
    HistoryEntry,
    NullEvents,
    Outcome,
    OutcomeStatus,
    Runner,
    SessionInfo,
    ToolRecord,
    Trigger,
    TurnInput,
    as_outcome,
    fire_source,
    fire_trigger,
)
from agentcron.agent.tool_entries import run_tool_call, tool_entry
from agentcron.config import EngineSettings
from agentcron.domain.budgets import ContextMode
from agentcron.domain.events import (
    EventBus,
    FireStarted,
    SessionSync,
    SystemEventFired,
    publish_fire_settled,
)
from agentcron.domain.gates import (
    SKIPPED_BY_GATE,
    Gate,
    GateResult,
    GateVerdict,
    notice_text,
    with_gate_output,
)
from agentcron.domain.jobs import Job, JobKind
from agentcron.domain.notify import silent_hint
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.sessions import Entry, Role
from agentcron.domain.states import STOPPED_MID_TURN, RunState
from agentcron.domain.triggers import with_event
from agentcron.runtime.clock import Clock
from agentcron.runtime.execution import Execution
from agentcron.runtime.gate import GatePolicy, run_gate
from agentcron.runtime.journal import Journal
from agentcron.runtime.notify import notify_outcome
from agentcron.runtime.slots import SlotPool
from agentcron.store.interface import RunRecords
from agentcron.store.writes import (
    Remember,
    RunEnd,
    Transition,
    TurnFinished,
    WriteResult,
    fire_end,
)

log = logging.getLogger(__name__)

SystemHandler = Callable[[Trigger], Awaitable[Outcome | str | None]]
"""Runs one fire of a system job: text = succeeded, None/"" = empty, raise = failed."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The evaluate step's verdict on a delivery job's result."""

    deliver: bool
    reason: str


Evaluator = Callable[[Job, Outcome], Awaitable[Evaluation] | Evaluation]
"""Decides whether a delivery job's result is worth delivering (e.g. a small LLM check)."""

MemoryReader = Callable[[str], Awaitable[list[HistoryEntry]]]
"""Reads a delivery job's memory: the newest history of its own session (`cron:{job_id}`)."""

# Answers that mean "nothing happened"; delivering them would only be noise.
_NOTHING = re.compile(
    r"^\W*(?:nothing(?:\s+new)?\s+to\s+report|no\s+(?:news|updates?|changes?)|all\s+(?:good|clear)"
    r"|n/?a|none|heartbeat_ok|ok)\W*$",
    re.IGNORECASE,
)


def evaluate_response(job: Job, outcome: Outcome) -> Evaluation:
    """The default evaluate step: deliver a real answer to a target the job asked for."""
    if not job.deliver:
        return Evaluation(False, "delivery is off for this job")
    if not (job.channel and job.to):
        # The reason is stored on the run (its delivery record): the text keeps its old word.
        return Evaluation(False, "the job has no legacy target (channel and to)")
    if outcome.status is OutcomeStatus.FAILED:
        return Evaluation(False, "the run failed; the error is in the run record")
    text = (outcome.text or "").strip()
    if outcome.status is OutcomeStatus.EMPTY or not text:
        return Evaluation(False, "the run had no result")
    if _NOTHING.match(text):
        return Evaluation(False, "the result says there is nothing to report")
    return Evaluation(True, "a result for the job's target")


async def evaluate(evaluator: Evaluator, job: Job, outcome: Outcome) -> Evaluation:
    verdict = evaluator(job, outcome)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if not isinstance(verdict, Evaluation):
        raise TypeError(f"an evaluator must return an Evaluation, not {type(verdict).__name__}")
    return verdict


def target_session_key(job: Job) -> str:
    """The session a delivery job's target names: the chat `to` on `channel`."""
    return f"{job.channel}:{job.to}"


def delivery_meta(job: Job, run_id: str) -> dict[str, Any]:
    """Metadata of a delivered result in the target's transcript (stored values: the source
    and flag keep seed 001's names, which clients read).
    """
    return {
        "source": "legacy_automation",
        "_legacy_delivery": True,
        "automation_id": job.id,
        "automation_name": job.name,
        "automation_run_id": run_id,
    }


def memory_key(job: Job) -> str:
    """The session that holds a delivery job's own memory."""
    return f"cron:{job.id}"


def remember_exchange(job: Job, run_id: str, prompt: str, outcome: Outcome) -> Remember | None:
    """What a delivery job's run saves in its memory: the prompt as the user's entry and the result
    as the assistant's, for a run that answered; nothing for a failed or empty one (its
    record is the run).
    """
    text = (outcome.text or "").strip()
    if outcome.status is not OutcomeStatus.SUCCEEDED or not text:
        return None
    meta = {
        "source": "legacy_automation",  # seed 001's name, stored (as in delivery_meta)
        "automation_id": job.id,
        "automation_name": job.name,
        "automation_run_id": run_id,
    }
    return Remember(
        memory_key(job),
        "cron",
        job.id,
        (Entry(Role.USER, prompt, meta), Entry(Role.ASSISTANT, outcome.text or "", meta)),
    )


Deliver = Callable[..., Coroutine[Any, Any, Any]]
"""Posts a delivery job's result into its target session (key, text, meta, channel, ...)."""


class IsolatedRuns:
    """Runs the engine's isolated fires (system jobs, delivery jobs), from RUNNING through
    the journal to the terminal state and the job's bookkeeping, each in an `Execution` on
    the slots the lanes use (`max_concurrent_runs`; `slots.runs` counts those in their
    handler or runner). The engine queues them per job.
    """

    def __init__(
        self,
        runner: Runner,
        *,
        journal: Journal,
        bus: EventBus,
        clock: Clock,
        slots: SlotPool,
        settings: EngineSettings,
        handlers: dict[str, SystemHandler],
        evaluator: Evaluator,
        deliver: Deliver | None,
        memory: MemoryReader | None,
        runs: RunRecords,
        gate_policy: GatePolicy | None = None,
    ) -> None:
        self.runner = runner
        self.runs = runs  # a `changes` job's last delivered outcome
        self.journal = journal
        self.bus = bus
        self.clock = clock
        self.slots = slots  # shared with the lanes; it counts the isolated runs apart
        self.settings = settings
        self.handlers = handlers  # system jobs (kind system_event): by name
        self.evaluator = evaluator
        self.deliver = deliver  # None: nothing delivers (the run record says so)
        # Reads a delivery job's memory (`cron:{job_id}`); None: the runner keeps no history,
        # and a delivery job's run reads and saves none (it pays nothing for it).
        self.memory = memory
        # The tool policy a delivery job's gate passes before it runs (None: all allowed).
        self.gate_policy = gate_policy or GatePolicy()

    def run(
        self, fire: ClaimedFire, may_start: Callable[[ClaimedFire], bool]
    ) -> Coroutine[Any, Any, None]:
        """Run a fire that is not a session turn to its end: a system job's handler, or a
        delivery job's isolated run followed by its evaluate step and delivery. Once it holds
        a slot, `may_start` says whether it starts at all (not during a stop: it is handed
        back); its runner may give the slot back while it waits (`paused()`).
        """
        execution = Execution(self.slots, self.slots.runs, self.clock, self.settings.turn_timeout)
        return execution.run(_IsolatedRun(self, fire, may_start, execution), ctx=log_context(fire))

    async def _history(self, fire: ClaimedFire, key: str) -> tuple[HistoryEntry, ...]:
        """A delivery job's memory, as its `context` asks (fresh: none, not read; summary:
        only its latest summary entry); a failed read costs the run its memory, not the run.
        """
        context = fire.job.context
        if self.memory is None or context is ContextMode.FRESH:
            return ()
        try:
            entries = tuple(await self.memory(key))
        except Exception:
            log.exception("could not read a delivery job's memory", extra=log_context(fire))
            return ()
        if context is ContextMode.SUMMARY:
            summaries = [e for e in entries if e.role == "summary"]
            return tuple(summaries[-1:])
        return entries

    async def _deliver_to_target(
        self, fire: ClaimedFire, outcome: Outcome
    ) -> tuple[dict[str, Any], str | None]:
        """The evaluate step, then delivery to the job's target; both go on the run."""
        job = fire.job
        try:
            verdict = await evaluate(self.evaluator, job, outcome)
        except Exception as exc:
            log.exception("the evaluate step failed", extra=log_context(fire))
            verdict = Evaluation(False, f"the evaluate step failed: {type(exc).__name__}: {exc}")
        record: dict[str, Any] = {
            "evaluated": {"deliver": verdict.deliver, "reason": verdict.reason},
            "target": {"channel": job.channel, "to": job.to} if job.channel or job.to else None,
            "delivered": False,
        }
        if not verdict.deliver:
            return record, None
        if self.deliver is None:
            record["error"] = "no delivery is wired to this engine"
            return record, None
        key = target_session_key(job)
        try:
            message = await self.deliver(
                key,
                outcome.text or "",
                delivery_meta(job, fire.run_id),
                channel=job.channel,
                chat_id=job.to,
                channel_meta=job.channel_meta,
            )
        except Exception as exc:
            log.exception("delivery to the job's target failed", extra=log_context(fire))
            record["error"] = f"{type(exc).__name__}: {exc}"
            return record, None
        record.update(delivered=True, session_key=key, message_id=message.id)
        return record, str(message.id)

    async def _notice(self, fire: ClaimedFire, result: GateResult) -> dict[str, Any]:
        """A `notice` gate's skip: one short notice to the job's target, as its result would
        go (no target or nothing wired: the record says so).
        """
        job = fire.job
        if not (job.deliver and job.channel and job.to):
            return {"delivered": False, "reason": "the job has no target (channel and to)"}
        if self.deliver is None:
            return {"delivered": False, "reason": "no delivery is wired to this engine"}
        key = target_session_key(job)
        try:
            message = await self.deliver(
                key,
                notice_text(job.name, result.output),
                delivery_meta(job, fire.run_id) | {"gate": GateVerdict.SKIP.value},
                channel=job.channel,
                chat_id=job.to,
                channel_meta=job.channel_meta,
            )
        except Exception as exc:
            log.exception("a gate's notice could not be delivered", extra=log_context(fire))
            return {"delivered": False, "reason": f"{type(exc).__name__}: {exc}"}
        return {"delivered": True, "session_key": key, "message_id": message.id}

    def finish(
        self,
        fire: ClaimedFire,
        state: RunState,
        outcome: Outcome,
        *,
        message_id: str | None = None,
        delivery: dict[str, Any] | None = None,
        remember: Remember | None = None,
    ) -> asyncio.Future[WriteResult]:
        transition, job_outcome = fire_end(
            fire,
            state,
            self.clock.now(),
            output=outcome.text,
            error=outcome.error,
            error_details=outcome.error_details,
            usage=outcome.usage,
            message_id=message_id,
            delivery=delivery,
            tool_calls=[run_tool_call(tool_entry(t, fire.run_id)) for t in outcome.tools],
        )
        return self.journal.submit(RunEnd(transition, job_outcome, remember))


class _IsolatedRun:
    """One isolated run's steps in its `Execution`: RUNNING written, the fire (and a system
    job's text) announced, the handler or the runner (with its memory's history), then the
    evaluate step, delivery and the end write.
    """

    __slots__ = (
        "begun",
        "execution",
        "fire",
        "gate",
        "handler",
        "may_start",
        "now",
        "remembers",
        "runs",
        "session",
        "system",
        "trigger",
    )

    def __init__(
        self,
        runs: IsolatedRuns,
        fire: ClaimedFire,
        may_start: Callable[[ClaimedFire], bool],
        execution: Execution,
    ) -> None:
        job = fire.job
        self.runs, self.fire, self.may_start = runs, fire, may_start
        self.execution = execution
        self.gate: GateResult | None = None  # what its gate said when it let the run through
        self.system = system = job.kind is JobKind.SYSTEM_EVENT
        self.handler = runs.handlers.get(job.name) if system else None
        self.remembers = not system and runs.memory is not None
        self.trigger = fire_trigger(fire)
        self.session = SessionInfo(
            key=f"system:{job.name}" if system else memory_key(job),
            channel=job.channel or ("system" if system else "cron"),
            chat_id=job.to or job.id,
            channel_meta=job.channel_meta,
            tz=job.spec.tz,
        )
        self.now: datetime | None = None  # the start's time: the runner's `now`
        self.begun = False  # RUNNING is committed: a cut ends the run interrupted

    async def start(self) -> bool:
        fire, runs = self.fire, self.runs
        if not self.may_start(fire):
            return False
        gate = fire.job.policy.gate
        if gate is not None and not self.system and not await self._pass_gate(gate):
            return False  # the gate ended it
        self.now = runs.clock.now()
        # Durable before the runner is called: after a crash this fire is interrupted, not
        # re-run.
        await runs.journal.write(RunEnd(Transition(fire.run_id, RunState.RUNNING, self.now)))
        self.begun = True
        return True

    async def _pass_gate(self, gate: Gate) -> bool:
        """Ask the job's gate, holding no slot (a slow gate keeps no other run waiting);
        True: the run goes on (with a slot again), False: the run ended on the gate's answer.
        """
        fire, runs = self.fire, self.runs
        self.execution.release()
        allowed = await runs.gate_policy.check(
            gate,
            job_id=fire.job.id,
            session_key=self.session.key,
            turn_id=fire.run_id,
            execution=self.execution,
        )
        if allowed.refusal is not None:  # the tool policy kept it from running
            result = allowed.refused()
        else:
            result = await run_gate(
                gate, allow_code=runs.settings.gates, approval_id=allowed.approval_id
            )
        record: dict[str, Any] = {"gate": result.as_dict()}
        log.info("gate said %s", result.verdict.value, extra=log_context(fire) | record["gate"])
        output = result.output or None
        if result.verdict is GateVerdict.RUN and not gate.no_llm:
            self.gate = result
            await self.execution.take()
            return True
        if allowed.refusal is not None:
            state, error = RunState.FAILED, allowed.refusal
        elif result.verdict is GateVerdict.ERROR:
            state, error = RunState.FAILED, f"the gate failed: {result.error}"
        elif result.verdict is GateVerdict.SKIP:
            state, error = RunState.SKIPPED, SKIPPED_BY_GATE
            if gate.notice:
                record["notice"] = await runs._notice(fire, result)
        else:  # no_llm: the gate is the whole job
            state, error = RunState.SUCCEEDED, None
        status = OutcomeStatus.EMPTY if state is RunState.SKIPPED else OutcomeStatus(state.value)
        written = await runs.finish(fire, state, Outcome(status, output, error), delivery=record)
        await self._settled(state, written)
        return False

    async def started(self) -> None:
        fire, bus = self.fire, self.runs.bus
        job = fire.job
        if not bus.active:
            return
        await bus.publish(
            FireStarted(
                session_key=job.session_key or "",
                job_id=job.id,
                run_id=fire.run_id,
                lateness_s=(self.runs.clock.now() - fire.fire_at).total_seconds(),
            )
        )
        if self.system:
            # Seed 004: a system event's text goes to its session's subscribers (live views),
            # whatever its handler then does.
            await bus.publish(
                SystemEventFired(
                    session_key=job.session_key or "",
                    job_id=job.id,
                    run_id=fire.run_id,
                    name=job.name,
                    text=job.message,
                )
            )

    async def call(self) -> Outcome:
        if self.handler is not None:
            return as_outcome(await self.handler(self.trigger))
        fire, runs = self.fire, self.runs
        job = fire.job
        prompt = with_event(job.message, fire.event_id, fire.event)
        if self.gate is not None:
            prompt = with_gate_output(prompt, self.gate.output)
        turn = TurnInput(
            turn_id=fire.run_id,
            source=fire_source(job),
            # A job whose notify policy holds outcomes is told how to mark one silent.
            prompt=prompt + silent_hint(job.policy.notify),
            history=await runs._history(fire, self.session.key) if self.remembers else (),
            now=self.now,
            trigger=self.trigger,
            runner_url=fire.job.runner_url,  # its own runner (None: the process's)
            tools=fire.job.tools,  # its tool allow-list (None: every tool)
        )
        return await runs.runner.run_turn(self.session, turn, NullEvents())

    async def end(self, outcome: Outcome) -> None:
        fire, runs = self.fire, self.runs
        job = fire.job
        delivery, message_id = None, None
        if not self.system:
            # Its notify policy first (a silent sentinel stripped): a held outcome is kept
            # on the run, not evaluated nor delivered.
            outcome, held, notified = await notify_outcome(runs.runs, fire, outcome)
            if held is None:
                delivery, message_id = await runs._deliver_to_target(fire, outcome)
                if notified is not None:
                    delivery["notify"] = notified["notify"]
            else:
                delivery = notified
            if self.gate is not None:  # what its gate said (it let the run through)
                delivery = (delivery or {}) | {"gate": self.gate.as_dict()}
        state = RunState(outcome.status.value)
        remember = (
            remember_exchange(job, fire.run_id, job.message, outcome) if self.remembers else None
        )
        result = await runs.finish(
            fire, state, outcome, message_id=message_id, delivery=delivery, remember=remember
        )
        if remember is not None and runs.bus.active:  # its memory's transcript grew
            await runs.bus.publish(SessionSync(session_key=remember.session_key))
        await self._settled(state, result)

    async def _settled(self, state: RunState, result: WriteResult | None) -> None:
        """The job's record (next run, auto-pause, removal) is committed: say so."""
        fire, runs = self.fire, self.runs
        if fire.job.session_key is not None and runs.bus.active:
            deleted = isinstance(result, TurnFinished) and result.job_deleted
            await publish_fire_settled(runs.bus, fire, state.value, job_deleted=deleted)

    async def cut(self, tools: tuple[ToolRecord, ...]) -> None:
        """A shutdown cut the run: interrupted, with the tool calls that ran (its end write is
        queued, not awaited). One cut before its RUNNING was committed is left to the reaper,
        as a crash's is.
        """
        if self.begun:
            outcome = Outcome.failed(STOPPED_MID_TURN, tools=tools)
            self.runs.finish(self.fire, RunState.INTERRUPTED, outcome)


def log_context(fire: ClaimedFire) -> dict[str, Any]:
    """The fire's ids for a log record's `extra`."""
    return {"job_id": fire.job.id, "run_id": fire.run_id, "session_key": fire.job.session_key}
