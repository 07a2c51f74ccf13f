"""Memory that fits the model (seed 004): a bounded history with compaction, and tool calls in it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from agentcron.agent.offline import SUMMARY_HEADER, OfflineModel, Reply
from agentcron.agent.runner import HistoryEntry, Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.states import TurnState
from agentcron.testing import FakeClock, wait_settled
from agentcron.turns.memory import estimate_tokens
from tests.conftest import T0, CronFactory, Recorder

KEY = "api:memory"
BUDGET = 2_000


class SeeingModel(OfflineModel):
    """The offline model, keeping what each of its requests was sent."""

    def __init__(self) -> None:
        super().__init__(0)
        self.seen: list[list[ModelMessage]] = []
        self.instructions: list[str | None] = []

    def _reply(self, messages: list[ModelMessage], info: AgentInfo) -> Reply:
        self.seen.append(list(messages))
        self.instructions.append(info.instructions)
        return super()._reply(messages, info)


async def say(cron: AgentCron, text: str, key: str = KEY) -> Any:
    turn = await cron.sessions.send(key, text)
    await wait_settled(cron.engine)
    return await cron.sessions.turn(turn.id)


async def fill(cron: AgentCron, count: int) -> None:
    """`count` earlier entries, alternating user and assistant, ~200 characters each."""
    await cron.sessions.create(KEY)
    for start in range(0, count, 500):
        await asyncio.gather(*(
            cron.store.sessions.append_message(
                KEY, "user" if i % 2 == 0 else "assistant",
                f"entry {i}: " + "lorem ipsum dolor sit amet " * 7, T0,
            )
            for i in range(start, min(start + 500, count))
        ))  # fmt: skip


def history_chars(messages: list[ModelMessage]) -> int:
    """Characters of history a request carried: everything before its last message (the turn's
    own prompt), the summary's header not counted.
    """
    total = 0
    for message in messages[:-1]:
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                total += len(part.content.removeprefix(SUMMARY_HEADER + "\n"))
            elif isinstance(part, UserPromptPart) and isinstance(part.content, str):
                total += len(part.content)
            elif isinstance(part, TextPart | ToolReturnPart):
                total += len(part.model_response_str() if isinstance(part, ToolReturnPart)
                             else part.content)  # fmt: skip
    return total


# 1,000 entries are 25 times the budget; the 5,000 (each one its own write) with
# AGENTCRON_LONG_TESTS=1.
@pytest.mark.parametrize("entries", [1000, pytest.param(5000, marks=pytest.mark.long)])
async def test_a_long_session_gets_a_summary_and_the_recent_window_within_budget(
    make_cron: CronFactory, entries: int
) -> None:
    model = SeeingModel()
    cron = await make_cron(runner=None, model=model,
                           settings=EngineSettings(history_budget=BUDGET))  # fmt: skip
    await fill(cron, entries)

    turn = await say(cron, "what did I just say")
    assert turn.state is TurnState.SUCCEEDED, turn.error
    # Two model requests: the compaction's summary, then the turn itself.
    summarize, answer = model.seen
    assert "Summarize the conversation" in (model.instructions[0] or "")
    # The turn got at most the budget (estimated at 4 characters a token).
    assert history_chars(answer) <= BUDGET * 4
    first = answer[0]
    assert isinstance(first, ModelRequest)
    assert isinstance(first.parts[0], SystemPromptPart)
    assert first.parts[0].content.startswith(SUMMARY_HEADER)
    # ... and the newest entries whole: the last one before the question is the last filled.
    assert f"entry {entries - 1}:" in str(answer[-2].parts[0])
    assert summarize  # the summary request saw the folded part

    messages = await cron.sessions.messages(KEY, limit=10_000)
    summaries = [m for m in messages if m.role == "summary"]
    assert len(summaries) == 1
    (summary,) = summaries
    assert summary.content.startswith("(offline model) Summary of ")
    assert summary.meta["turn_id"] == turn.id
    # The summary is written with the turn's end: just before its reply.
    reply = next(m for m in messages if m.id == turn.reply_message_id)
    assert summary.seq == reply.seq - 1
    covered = next(m for m in messages if m.id == summary.meta["through_id"])
    assert covered.seq < entries

    # The next turn starts from that summary: no new compaction, still within the budget.
    model.seen.clear()
    again = await say(cron, "hello")
    assert again.state is TurnState.SUCCEEDED
    (request,) = model.seen
    assert history_chars(request) <= BUDGET * 4
    assert str(request[0].parts[0].content).startswith(SUMMARY_HEADER)
    all_messages = await cron.sessions.messages(KEY, limit=10_000)
    assert [m.role for m in all_messages].count("summary") == 1


async def test_after_a_tool_call_the_next_turn_has_the_call_and_its_result(
    make_cron: CronFactory,
) -> None:
    model = SeeingModel()
    cron = await make_cron(runner=None, model=model)
    await cron.sessions.create(KEY)
    done = await say(cron, "remind me in 10 minutes to stretch")
    assert done.state is TurnState.SUCCEEDED

    model.seen.clear()
    await say(cron, "thanks")
    (request,) = model.seen
    calls = [p for m in request if isinstance(m, ModelResponse) for p in m.parts
             if isinstance(p, ToolCallPart)]  # fmt: skip
    returns = [p for m in request if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]  # fmt: skip
    (call,) = calls
    (result,) = returns
    assert call.tool_name == "cron"
    assert call.args_as_dict()["action"] == "add"
    assert result.tool_call_id == call.tool_call_id
    assert str(result.content).startswith("Scheduled “stretch”")


class Plain:
    """A runner of its own, with history but no `summarize`."""

    def __init__(self) -> None:
        self.histories: list[list[HistoryEntry]] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.histories.append(list(turn.history))
        return Outcome.succeeded("ok")


async def test_a_runner_that_cannot_summarize_gets_the_newest_entries_within_budget(
    make_cron: CronFactory,
) -> None:
    runner = Plain()
    cron = await make_cron(runner=runner, settings=EngineSettings(history_budget=BUDGET))
    await fill(cron, 600)
    assert (await say(cron, "hi")).state is TurnState.SUCCEEDED
    (history,) = runner.histories
    assert sum(estimate_tokens(h.role, h.content, h.meta) for h in history) <= BUDGET
    assert history[-1].content.startswith("entry 599:")
    messages = await cron.sessions.messages(KEY, limit=1000)
    assert "summary" not in {m.role for m in messages}  # nothing written for it


async def test_a_runner_without_history_reads_and_writes_nothing_for_memory(
    make_cron: CronFactory, recorder: Recorder, clock: FakeClock
) -> None:
    cron = await make_cron(settings=EngineSettings(history_budget=BUDGET))  # a plain callable
    await fill(cron, 600)
    reads = 0
    history = cron.store.sessions.history

    async def counting(*args: Any, **kw: Any) -> Any:
        nonlocal reads
        reads += 1
        return await history(*args, **kw)

    cron.store.sessions.history = counting  # type: ignore[method-assign]
    await cron.jobs.create(name="ping", when="in 1m", session_key=KEY)
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    assert recorder.names() == ["ping"]
    assert reads == 0
    messages = await cron.sessions.messages(KEY, limit=1000)
    assert "summary" not in {m.role for m in messages}
