"""How the CLI prints times, a run's token usage and cost, and a job's policy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentcron.cli.render import gate, policy, usage, when


def test_usage_says_unpriced_and_never_shows_an_unknown_cost_as_zero() -> None:
    assert usage(None) == "-"
    run = {"input_tokens": 1200, "output_tokens": 80, "cost_usd": None, "model": "ollama:x"}
    assert usage(run) == "1,200 in / 80 out tokens, unpriced (ollama:x)"
    priced = {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.0012, "model": "openai:gpt-4o"}
    assert usage(priced) == "10 in / 5 out tokens, $0.001200 (openai:gpt-4o)"
    mixed = {"counted": 3, "input_tokens": 30, "output_tokens": 9, "cost_usd": 0.5, "unpriced": 1}
    assert usage(mixed) == "30 in / 9 out tokens over 3 runs, $0.500000 + 1 unpriced"
    none_priced = {"counted": 2, "input_tokens": 2, "output_tokens": 2, "cost_usd": 0.0,
                   "unpriced": 2}  # fmt: skip
    assert usage(none_priced) == "2 in / 2 out tokens over 2 runs, 2 unpriced"


def test_totals_say_what_they_were_summed_over_not_counted() -> None:
    turns = {"counted": 18, "input_tokens": 5, "output_tokens": 1, "cost_usd": 0.0, "unpriced": 0}
    assert usage(turns, "turns") == "5 in / 1 out tokens over 18 turns, $0.000000"
    one = {"counted": 1, "input_tokens": 5, "output_tokens": 1, "cost_usd": 0.0, "unpriced": 1}
    assert usage(one, "turns") == "5 in / 1 out tokens over 1 turn, 1 unpriced"
    assert "counted" not in usage(turns, "turns")


@pytest.mark.parametrize(
    ("instant", "zone", "shown"),
    [
        ("2026-11-26T14:00:00.123456Z", "America/New_York", "2026-11-26 09:00:00 America/New_York"),
        ("2026-07-01T07:30:05+00:00", "Europe/Berlin", "2026-07-01 09:30:05 Europe/Berlin"),
        (datetime(2026, 3, 29, 1, 0, 0, 999, tzinfo=UTC), "UTC", "2026-03-29 01:00:00 UTC"),
        (None, "UTC", "-"),
    ],
)
def test_a_time_names_its_zone_and_has_no_microseconds(
    instant: str | datetime | None, zone: str, shown: str
) -> None:
    assert when(instant, zone) == shown


def test_a_policy_is_printed_in_words_not_json() -> None:
    data = {"overlap": "buffer_one", "catchup": "latest", "catchup_window_s": 86400,
            "max_failures": 5, "max_runs": 3, "end_at": "2027-01-01T12:00:00Z",
            "delete_after_run": True, "jitter": False}  # fmt: skip
    text = policy(data, "Europe/Berlin")
    assert text.splitlines() == [
        "at most one fire waits while the last one runs; more are skipped",
        "of the fires missed while no engine ran, the latest runs (within 1 d)",
        "paused after 5 failures in a row",
        "ends after 3 runs",
        "ends at 2027-01-01 13:00:00 Europe/Berlin",
        "removed once its last fire ends",
    ]
    assert "{" not in text
    never = policy({**data, "max_failures": 0, "catchup_window_s": 90, "max_runs": None,
                    "end_at": None, "delete_after_run": False}, "UTC")  # fmt: skip
    assert "never paused for failures" in never
    assert "(within 90 s)" in never


@pytest.mark.parametrize(
    ("quiet", "said"),
    [
        ("hold", None),  # the default goes unsaid
        (None, None),  # a server before quiet hours
        ("silent", "in its session's quiet hours it runs, its result never sent"),
        ("wait", "in its session's quiet hours a fire waits until they end, then runs"),
    ],
)
def test_a_quiet_choice_is_printed_in_words_when_not_the_default(
    quiet: str | None, said: str | None
) -> None:
    data = {"overlap": "skip", "catchup": "skip", "catchup_window_s": 60, "max_failures": 0,
            "quiet": quiet}  # fmt: skip
    lines = policy(data, "UTC").splitlines()
    quiet_lines = [line for line in lines if "quiet" in line]
    assert quiet_lines == ([said] if said else [])


def test_a_gate_is_printed_in_words() -> None:
    command = {"kind": "command", "target": ["./check", "new orders"], "timeout_s": 2.5,
               "no_llm": True, "notice": True}  # fmt: skip
    assert gate(command) == (
        "gate: before each fire it runs the command ./check 'new orders' (exit 0 runs the "
        "fire, 1 skips it), within 2.5 s; no LLM: the gate is the whole job; a skipped fire "
        "leaves a notice in the chat"
    )
    python = gate({"kind": "python", "target": "ops.checks:queue", "timeout_s": 10})
    assert python == (
        "gate: before each fire it calls ops.checks:queue (a true answer runs the fire, a "
        "false one skips it), within 10 s"
    )
