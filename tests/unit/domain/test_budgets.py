"""Pure budget figures (domain/budgets.py): the running spend, the estimate, the decision
before a fire (over_budget) and after a run (cap_reached), the UTC day and month rollover.

Fixed instants, no clock, no database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentcron.domain.budgets import (
    ESTIMATE_RUNS,
    Budget,
    Spend,
    add_run,
    cap_reached,
    money,
    newly_reached,
    over_budget,
    session_blocked,
    spend_at,
    with_estimates,
)

NOON = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
# The last instant of a UTC month and the first of the next.
MONTH_END = datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)
MONTH_START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def spent(day_usd: float = 0.0, day_tokens: int = 0, *, runs: int = 1, **kw: object) -> Spend:
    """The figures of 2026-11-22 with an estimate made of `runs` runs."""
    base = {
        "day": "2026-11-22",
        "month": "2026-11",
        "day_usd": day_usd,
        "day_tokens": day_tokens,
        "month_usd": day_usd,
        "month_tokens": day_tokens,
        "est_runs": runs,
    }
    base.update(kw)
    return Spend.of(base) or Spend()


# -- Budget / Spend: stored forms ----------------------------------------------------------


def test_budget_of_keeps_only_caps_and_treats_empty_as_none() -> None:
    assert Budget.of(None) is None
    assert Budget.of({}) is None
    assert Budget.of({"usd_day": None, "unknown": 3}) is None
    budget = Budget.of({"usd_day": 0.5, "tokens_run": 100, "unknown": 3})
    assert budget == Budget(usd_day=0.5, tokens_run=100)
    assert budget is not None
    assert budget.as_dict() == {"usd_day": 0.5, "tokens_run": 100}
    assert Budget().empty
    assert not Budget(tokens_month=1).empty


def test_spend_round_trips_and_ignores_unknown_keys() -> None:
    s = Spend(day="2026-11-22", day_usd=0.25, est_tokens=7, est_runs=2)
    assert Spend.of({**s.as_dict(), "extra": 1}) == s
    assert Spend.of(None) is None
    assert Spend.of({}) is None


# -- rollover at UTC midnight and month start ----------------------------------------------

# fmt: off
ROLLOVER_CASES = [
    # id, figures' day, figures' month, now, day kept, month kept
    ("same day", "2026-11-22", "2026-11", NOON, True, True),
    ("last second of the day", "2026-11-22", "2026-11", datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC), True, True),
    ("UTC midnight: a new day", "2026-11-22", "2026-11", datetime(2026, 11, 23, tzinfo=UTC), False, True),
    ("month's last second", "2026-11-30", "2026-11", MONTH_END, True, True),
    ("month start: both roll", "2026-11-30", "2026-11", MONTH_START, False, False),
    ("a zone ahead of UTC is still UTC's day", "2026-11-22", "2026-11", datetime(2026, 11, 23, 0, 30, tzinfo=timezone(timedelta(hours=2))), True, True),
    ("a zone behind UTC past UTC midnight", "2026-11-22", "2026-11", datetime(2026, 11, 22, 20, 0, tzinfo=timezone(timedelta(hours=-5))), False, True),
    ("no figures yet", "", "", NOON, False, False),
]
# fmt: on


@pytest.mark.parametrize(
    ("day", "month", "now", "day_kept", "month_kept"),
    [pytest.param(*c[1:], id=c[0]) for c in ROLLOVER_CASES],
)
def test_spend_at_rolls_day_and_month_over_in_utc(
    day: str, month: str, now: datetime, day_kept: bool, month_kept: bool
) -> None:
    before = Spend(day, 1.5, 100, month, 9.0, 900, 0.5, 50, 3)
    after = spend_at(before, now)
    utc = now.astimezone(UTC)
    assert (after.day, after.month) == (utc.date().isoformat(), utc.strftime("%Y-%m"))
    assert (after.day_usd, after.day_tokens) == ((1.5, 100) if day_kept else (0.0, 0))
    assert (after.month_usd, after.month_tokens) == ((9.0, 900) if month_kept else (0.0, 0))
    # the estimate survives any rollover
    assert (after.est_usd, after.est_tokens, after.est_runs) == (0.5, 50, 3)


# -- add_run: totals and the rolling estimate ----------------------------------------------


def test_add_run_adds_to_the_day_and_month() -> None:
    s = add_run(None, NOON, 100, 0.01)
    s = add_run(s, NOON + timedelta(hours=1), 300, 0.03)
    assert (s.day, s.day_tokens, s.day_usd) == ("2026-11-22", 400, 0.04)
    assert (s.month, s.month_tokens, s.month_usd) == ("2026-11", 400, 0.04)
    assert (s.est_runs, s.est_tokens, s.est_usd) == (2, 200, 0.02)  # exact mean of two


def test_add_run_without_a_price_counts_tokens_only() -> None:
    s = add_run(spent(0.5, 10), NOON, 90, None)
    assert (s.day_usd, s.day_tokens, s.month_usd) == (0.5, 100, 0.5)


def test_add_run_across_midnight_starts_the_new_day_but_keeps_the_month() -> None:
    s = add_run(spent(0.5, 10), datetime(2026, 11, 23, 0, 0, 1, tzinfo=UTC), 5, 0.1)
    assert (s.day, s.day_tokens, s.day_usd) == ("2026-11-23", 5, 0.1)
    assert (s.month_tokens, s.month_usd) == (15, 0.6)


def test_add_run_at_month_start_starts_both() -> None:
    s = add_run(spent(0.5, 10), MONTH_START, 5, 0.1)
    assert (s.day, s.month, s.day_tokens, s.month_tokens) == ("2026-12-01", "2026-12", 5, 5)


ESTIMATE_CASES = [
    # id, tokens of the runs in order, expected estimate (tokens), runs counted
    ("one run", [100], 100, 1),
    ("exact mean while fewer than ESTIMATE_RUNS", [100, 200, 300], 200, 3),
    ("exact mean at ESTIMATE_RUNS", [100, 200, 300, 400, 500], 300, ESTIMATE_RUNS),
    # past ESTIMATE_RUNS each run weighs 1/ESTIMATE_RUNS: 300 + (800 - 300) / 5
    ("rolling past ESTIMATE_RUNS", [100, 200, 300, 400, 500, 800], 400, ESTIMATE_RUNS),
    ("a steady job's estimate stays", [250] * 12, 250, ESTIMATE_RUNS),
]


@pytest.mark.parametrize(
    ("runs", "estimate", "counted"), [pytest.param(*c[1:], id=c[0]) for c in ESTIMATE_CASES]
)
def test_the_estimate_is_a_rolling_mean(runs: list[int], estimate: int, counted: int) -> None:
    s: Spend | None = None
    for tokens in runs:
        s = add_run(s, NOON, tokens, tokens / 10_000)
    assert s is not None
    assert (s.est_tokens, s.est_runs) == (estimate, counted)
    assert s.est_usd == pytest.approx(estimate / 10_000)


# -- over_budget: the decision before a fire -----------------------------------------------

# Figures of the day: $0.40 and 400 tokens spent, an estimate of $0.10 / 100 tokens.
DAY = spent(0.40, 400, est_usd=0.10, est_tokens=100)
# fmt: off
OVER_CASES = [
    # id, budget, figures, now, skipped?, words in the reason
    ("no budget", None, DAY, NOON, False, None),
    ("no run yet: no estimate, the first fire runs", Budget(usd_day=0.01), spent(0.5, runs=0), NOON, False, None),
    ("fits the day exactly", Budget(usd_day=0.50), DAY, NOON, False, None),
    ("would pass the day", Budget(usd_day=0.49), DAY, NOON, True, "per day"),
    ("tokens fit the day exactly", Budget(tokens_day=500), DAY, NOON, False, None),
    ("tokens would pass the day", Budget(tokens_day=499), DAY, NOON, True, "tokens per day"),
    ("run estimate over the per-run cap", Budget(usd_run=0.05), DAY, NOON, True, "per run"),
    ("run estimate within the per-run cap", Budget(tokens_run=100), DAY, NOON, False, None),
    ("tokens per run over", Budget(tokens_run=99), DAY, NOON, True, "tokens per run"),
    ("would pass the month", Budget(usd_month=0.45), DAY, NOON, True, "per month"),
    ("a new UTC day: the day's spend counts from zero", Budget(usd_day=0.49), DAY, datetime(2026, 11, 23, tzinfo=UTC), False, None),
    ("a new day does not clear the month", Budget(usd_month=0.45), DAY, datetime(2026, 11, 23, tzinfo=UTC), True, "per month"),
    ("a new month clears it", Budget(usd_month=0.45), DAY, MONTH_START, False, None),
]
# fmt: on


@pytest.mark.parametrize(
    ("budget", "figures", "now", "skipped", "words"),
    [pytest.param(*c[1:], id=c[0]) for c in OVER_CASES],
)
def test_over_budget(
    budget: Budget | None, figures: Spend, now: datetime, skipped: bool, words: str | None
) -> None:
    reason = over_budget(budget, figures, now)
    assert (reason is not None) is skipped
    if words is not None:
        assert reason is not None
        assert reason.endswith(words)


def test_over_budget_says_the_money_in_words() -> None:
    reason = over_budget(Budget(usd_day=0.49), DAY, NOON)
    assert reason == (
        "estimated $0.10 for this run on top of $0.40 spent would pass the budget of $0.49 per day"
    )
    reason = over_budget(Budget(tokens_day=499), DAY, NOON)
    assert reason == (
        "estimated 100 tokens for this run on top of 400 used would pass the budget of "
        "499 tokens per day"
    )


# -- cap_reached: the decision after a run --------------------------------------------------

# fmt: off
CAP_CASES = [
    # id, budget, figures with the run added, run tokens, run usd, reason or None
    ("no budget", None, spent(9.0, 9000), 10, 1.0, None),
    ("below the day cap", Budget(usd_day=0.5), spent(0.49), 10, 0.1, None),
    ("at the day cap", Budget(usd_day=0.5), spent(0.5), 10, 0.1, "budget reached: $0.50 of $0.50 per day"),
    ("past the day cap", Budget(usd_day=0.5), spent(0.6), 10, 0.1, "budget reached: $0.60 of $0.50 per day"),
    ("tokens at the day cap", Budget(tokens_day=1000), spent(0, 1000), 10, None, "budget reached: 1,000 of 1,000 tokens per day"),
    ("one run at the per-run cap", Budget(usd_run=0.1), spent(0.1), 10, 0.1, "budget reached: $0.10 of $0.10 per run"),
    ("one run under the per-run cap", Budget(usd_run=0.1), spent(5.0), 10, 0.09, None),
    ("tokens of one run over", Budget(tokens_run=5), spent(0, 10), 10, None, "budget reached: 10 of 5 tokens per run"),
    ("an unpriced run reaches no money cap", Budget(usd_run=0.0001), spent(0, 10), 10, None, None),
    ("the month", Budget(usd_month=2.0), spent(0.1, month_usd=2.5), 10, 0.1, "budget reached: $2.50 of $2.00 per month"),
]
# fmt: on


@pytest.mark.parametrize(
    ("budget", "figures", "tokens", "usd", "reason"),
    [pytest.param(*c[1:], id=c[0]) for c in CAP_CASES],
)
def test_cap_reached(
    budget: Budget | None, figures: Spend, tokens: int, usd: float | None, reason: str | None
) -> None:
    assert cap_reached(budget, figures, tokens, usd) == reason


@pytest.mark.parametrize(
    ("usd", "text"),
    [(0, "$0.00"), (0.5, "$0.50"), (1234.5, "$1,234.50"), (0.01, "$0.01"), (0.0042, "$0.0042")],
)
def test_money(usd: float, text: str) -> None:
    assert money(usd) == text


# -- a session's budget: blocked before a fire, told once after a run ----------------------

# fmt: off
SESSION_CASES = [
    # id, budget, figures, now, reason or None
    ("no budget", None, DAY, NOON, None),
    ("within", Budget(usd_day=1.0), DAY, NOON, None),
    ("the day's cap already reached, even without an estimate", Budget(usd_day=0.4), spent(0.4, runs=0), NOON, "budget reached: $0.40 of $0.40 per day"),
    ("the estimate would pass the day", Budget(usd_day=0.45), DAY, NOON, "estimated $0.10 for this run on top of $0.40 spent would pass the budget of $0.45 per day"),
    ("a per-run cap is not 'reached' before a run", Budget(tokens_run=100), DAY, NOON, None),
    ("the next UTC day runs again", Budget(usd_day=0.4), spent(0.4), datetime(2026, 11, 23, tzinfo=UTC), None),
]
# fmt: on


@pytest.mark.parametrize(
    ("budget", "figures", "now", "reason"), [pytest.param(*c[1:], id=c[0]) for c in SESSION_CASES]
)
def test_session_blocked(
    budget: Budget | None, figures: Spend, now: datetime, reason: str | None
) -> None:
    assert session_blocked(budget, figures, now) == reason


def test_newly_reached_tells_a_period_cap_once_and_a_per_run_cap_each_time() -> None:
    cap = Budget(usd_day=0.5, usd_run=0.3)
    before = spent(0.4)
    after = add_run(before, NOON, 10, 0.1)
    assert newly_reached(cap, before, after, 10, 0.1) == "budget reached: $0.50 of $0.50 per day"
    again = add_run(after, NOON, 10, 0.1)  # a run now after the cap: told already
    assert newly_reached(cap, after, again, 10, 0.1) is None
    big = add_run(spent(0.0), NOON, 10, 0.35)
    assert newly_reached(cap, spent(0.0), big, 10, 0.35) == "budget reached: $0.35 of $0.30 per run"
    assert newly_reached(None, before, after, 10, 0.1) is None


def test_with_estimates_adds_runs_at_the_estimate_and_keeps_it() -> None:
    s = with_estimates(DAY, NOON, 2)
    assert (s.day_usd, s.day_tokens, s.month_usd, s.month_tokens) == (0.6, 600, 0.6, 600)
    assert (s.est_usd, s.est_tokens, s.est_runs) == (0.1, 100, 1)
    assert with_estimates(DAY, datetime(2026, 11, 23, tzinfo=UTC), 1).day_usd == 0.1
