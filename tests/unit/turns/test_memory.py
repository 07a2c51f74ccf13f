"""The pure memory plan: what a turn's runner gets within its token budget, what is folded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agentcron.agent.builtin import history_to_messages, summary_prompt, tool_records
from agentcron.agent.offline import SUMMARY_HEADER, offline_summary
from agentcron.agent.runner import HistoryEntry, ToolRecord
from agentcron.agent.tool_entries import MAX_TOOL_ARGS_CHARS, MAX_TOOL_RESULT_CHARS, tool_entry
from agentcron.domain.sessions import Message
from agentcron.turns.memory import estimate_tokens, plan_memory, summary_entry

T = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def msg(seq: int, role: str = "user", chars: int = 36, **meta: Any) -> Message:
    """An entry of `chars` characters: 36 chars = 9 + 4 = 13 estimated tokens."""
    return Message(f"m{seq}", "api:a", seq, role, "x" * chars, meta, T)


def ids(messages: tuple[Message, ...]) -> list[str]:
    return [m.id for m in messages]


def test_the_estimate_is_a_quarter_of_the_characters_plus_framing() -> None:
    assert estimate_tokens("user", "") == 4
    assert estimate_tokens("user", "x" * 36) == 13
    assert estimate_tokens("user", "x" * 37) == 14
    # a tool entry counts its name and arguments too: "ok" + "cron" + '{"a": 1}' = 14 chars
    assert estimate_tokens("tool", "ok", {"name": "cron", "args": {"a": 1}}) == 4 + 4


def test_a_history_within_the_budget_is_given_whole() -> None:
    window = [msg(i) for i in range(1, 6)]  # 65 tokens
    plan = plan_memory(window, 65, window_full=False)
    assert not plan.fold
    assert ids(plan.history) == ["m1", "m2", "m3", "m4", "m5"]


def test_past_the_budget_the_newest_half_is_kept_and_the_rest_folded() -> None:
    window = [msg(i) for i in range(1, 11)]  # 130 tokens
    plan = plan_memory(window, 100, window_full=False)
    assert plan.fold
    assert ids(plan.history) == ["m8", "m9", "m10"]  # 39 tokens <= 50, a fourth would be 52
    assert ids(plan.compact) == [f"m{i}" for i in range(1, 8)]
    assert plan.previous is None
    assert plan.through_id == "m7"


def test_a_summary_stands_for_what_it_covers() -> None:
    summary = msg(9, "summary", 40, through_id="m4")
    window = [*(msg(i) for i in range(1, 9)), summary, msg(10), msg(11)]
    plan = plan_memory(window, 1000, window_full=True)
    assert not plan.fold
    # the summary first, then what it does not cover; covered entries left out
    assert ids(plan.history) == ["m9", "m5", "m6", "m7", "m8", "m10", "m11"]


def test_only_the_newest_summary_counts() -> None:
    old = msg(3, "summary", through_id="m1")
    new = msg(6, "summary", through_id="m4")
    window = [msg(1), msg(2), old, msg(4), msg(5), new, msg(7)]
    plan = plan_memory(window, 1000, window_full=False)
    assert ids(plan.history) == ["m6", "m5", "m7"]


def test_a_new_summary_extends_the_last_one() -> None:
    summary = msg(5, "summary", 40, through_id="m2", entries=2)
    window = [msg(1), msg(2), msg(3), msg(4), summary, *(msg(i) for i in range(6, 12))]
    plan = plan_memory(window, 100, window_full=False)
    assert plan.fold
    assert plan.previous is summary
    assert ids(plan.compact) == ["m3", "m4", "m6", "m7", "m8"]
    assert ids(plan.history) == ["m9", "m10", "m11"]
    assert plan.through_id == "m8"


def test_a_full_window_without_a_summary_is_compacted_even_within_the_budget() -> None:
    # The read hit its count limit: older entries exist that no summary covers.
    window = [msg(i) for i in range(1, 11)]
    plan = plan_memory(window, 10_000, window_full=True)
    assert plan.fold
    assert ids(plan.history) == ["m6", "m7", "m8", "m9", "m10"]  # half the window
    assert plan.through_id == "m5"


def test_a_full_window_that_reaches_the_last_summary_is_not_compacted() -> None:
    summary = msg(4, "summary", through_id="m2")
    window = [msg(1), msg(2), msg(3), summary, msg(5), msg(6)]
    assert not plan_memory(window, 10_000, window_full=True).fold


def test_an_entry_larger_than_the_budget_is_folded() -> None:
    window = [msg(1), msg(2, chars=4000)]
    plan = plan_memory(window, 100, window_full=False)
    assert plan.fold
    assert plan.history == ()
    assert ids(plan.compact) == ["m1", "m2"]


def test_a_budget_below_one_token_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        plan_memory([], 0, window_full=False)


def test_a_summary_entry_is_bounded_to_a_quarter_of_the_budget() -> None:
    entry = summary_entry("word " * 1000, through_id="m7", covered=7, turn_id="t", budget=100)
    assert entry.role == "summary"
    assert len(entry.content) <= 25 * 4
    assert entry.content.endswith("…")
    assert entry.meta == {"through_id": "m7", "entries": 7, "turn_id": "t"}


def test_a_tool_entry_keeps_call_and_result_truncated() -> None:
    small = tool_entry(ToolRecord("c1", "cron", {"action": "list"}, "3 jobs"), "t1")
    assert (small.role, small.content) == ("tool", "3 jobs")
    assert small.meta == {"turn_id": "t1", "call_id": "c1", "name": "cron",
                          "args": {"action": "list"}, "ok": True}  # fmt: skip
    big = tool_entry(ToolRecord("c2", "fetch", {"q": "y" * 5000}, "z" * 9000, ok=False), "t1")
    assert len(big.content) == MAX_TOOL_RESULT_CHARS
    assert len(big.meta["args"]["_truncated"]) == MAX_TOOL_ARGS_CHARS
    assert big.meta["truncated"] is True
    assert big.meta["ok"] is False


def test_tool_and_summary_entries_become_model_messages() -> None:
    history = [
        HistoryEntry("summary", "we talked about walruses"),
        HistoryEntry("user", "list my automations"),
        HistoryEntry(
            "tool", "2 jobs", {"call_id": "c1", "name": "cron", "args": {"action": "list"}}
        ),
        HistoryEntry("tool", "done", {"call_id": "c2", "name": "cron", "args": {}}),
        HistoryEntry("assistant", "You have 2."),
    ]
    messages = history_to_messages(history)
    assert [type(m) for m in messages] == [
        ModelRequest, ModelResponse, ModelRequest, ModelResponse, ModelRequest, ModelResponse,
    ]  # fmt: skip
    first = messages[0].parts
    assert isinstance(first[0], SystemPromptPart)
    assert first[0].content == f"{SUMMARY_HEADER}\nwe talked about walruses"
    assert isinstance(first[1], UserPromptPart)
    (call,) = messages[1].parts
    assert isinstance(call, ToolCallPart)
    assert (call.tool_name, call.args, call.tool_call_id) == ("cron", {"action": "list"}, "c1")
    (answer,) = messages[2].parts
    assert isinstance(answer, ToolReturnPart)
    assert (answer.tool_name, answer.content, answer.tool_call_id) == ("cron", "2 jobs", "c1")
    assert isinstance(messages[4].parts[0], ToolReturnPart)
    assert messages[5].parts == [TextPart("You have 2.")]


def test_tool_records_pair_this_runs_calls_with_their_returns() -> None:
    messages = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ToolCallPart("old", {}, "c0")]),  # history: another run
        ModelRequest(parts=[ToolReturnPart("old", "x", "c0")]),
        ModelResponse(parts=[ToolCallPart("cron", {"action": "list"}, "c1"),
                             ToolCallPart("cron", {"action": "bad"}, "c2")], run_id="r"),
        ModelRequest(parts=[ToolReturnPart("cron", "2 jobs", "c1"),
                            ToolReturnPart("cron", "unknown action", "c2", outcome="retried")]),
        ModelResponse(parts=[ToolCallPart("cron", {}, "c3")], run_id="r"),
    ]  # fmt: skip
    records = tool_records(messages, "r")
    assert [(r.call_id, r.name, r.ok) for r in records] == [
        ("c1", "cron", True), ("c2", "cron", False), ("c3", "cron", False),
    ]  # fmt: skip
    assert records[0].result == "2 jobs"
    assert "unknown action" in records[1].result
    assert records[2].result.startswith("(no result")


def test_the_offline_summary_is_deterministic() -> None:
    entries = [
        HistoryEntry("user", "the code word is walrus"),
        HistoryEntry("tool", "Scheduled", {"name": "cron", "args": {"action": "add"}}),
        HistoryEntry("assistant", "ok"),
        HistoryEntry("user", "and the colour is teal"),
    ]
    prompt = summary_prompt(entries, "we met", 500)
    text = offline_summary(prompt)
    assert text == offline_summary(prompt)
    assert text == (
        '(offline model) Summary of 4 earlier entries. The user said: "the code word is walrus"; '
        '"and the colour is teal". Tools called: cron (1x). Before that: we met'
    )
