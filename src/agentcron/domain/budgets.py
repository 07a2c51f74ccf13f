"""Budgets and per-job context (pure, no I/O, no clock read: every function takes `now`).

A job may carry a `Budget`: tokens and money per run, per UTC day and per UTC month. The job
row keeps its running `Spend` (what its fires spent today and this month, and an estimate of
one run: the mean of its recent runs), updated in the same write that records a run's end;
only a job with a budget keeps one. Before a fire, `over_budget` says whether the estimate
would pass a cap (the fire is then recorded `skipped`); after a run, `cap_reached` says whether
a cap is reached (the job is then paused until a person resumes it).

A session may carry a `Budget` too: its spend across its jobs' fires, kept on the session row
(again only with a budget). Before a fire of any job of the session, `session_blocked` says
whether the session's caps stop it; a session at a cap pauses no job: its jobs' fires are
skipped until the day or month turns or a person raises the budget.

Days and months are UTC, as the usage per day the API reports by default.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

# How many recent runs the estimate of one run averages over (a rolling mean: exact for the
# first ESTIMATE_RUNS runs, then each new run weighs 1/ESTIMATE_RUNS).
ESTIMATE_RUNS = 5
# Whole tokens and micro-dollars are enough for every figure; rounding keeps the JSON short.
_USD_DIGITS = 6


class ContextMode(enum.StrEnum):
    """What history a job's turns get."""

    CONTINUE = "continue"  # the conversation, as any turn of the session (the default)
    SUMMARY = "summary"  # only the session's latest summary (if any), then the fire's prompt
    FRESH = "fresh"  # no history: only the fire's prompt


@dataclass(frozen=True, slots=True)
class Budget:
    """A job's caps (None: no cap of that kind). Money in US dollars, from the runs' reported
    cost (a run without a known price counts its tokens only).
    """

    usd_run: float | None = None
    usd_day: float | None = None
    usd_month: float | None = None
    tokens_run: int | None = None
    tokens_day: int | None = None
    tokens_month: int | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def as_dict(self) -> dict[str, Any]:
        """The caps that are set (the stored and wire form)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> Budget | None:
        """From the stored form; None for none or an empty one."""
        if not data:
            return None
        names = {f.name for f in fields(cls)}
        budget = cls(**{k: v for k, v in data.items() if k in names and v is not None})
        return None if budget.empty else budget


@dataclass(frozen=True, slots=True)
class Spend:
    """A budgeted job's running figures: today's and this month's spend (UTC), and the
    estimate of one run (a rolling mean over the last runs).
    """

    day: str = ""  # YYYY-MM-DD (UTC) the day figures are of
    day_usd: float = 0.0
    day_tokens: int = 0
    month: str = ""  # YYYY-MM (UTC)
    month_usd: float = 0.0
    month_tokens: int = 0
    est_usd: float = 0.0
    est_tokens: int = 0
    est_runs: int = 0  # runs the estimate is made of (capped at ESTIMATE_RUNS)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> Spend | None:
        if not data:
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _utc(now: datetime) -> datetime:
    return now.astimezone(UTC)


def spend_at(spend: Spend | None, now: datetime) -> Spend:
    """The running figures as of `now`: a day or month that has passed counts from zero."""
    spend = spend or Spend()
    day, month = _utc(now).date().isoformat(), _utc(now).strftime("%Y-%m")
    if spend.day != day:
        spend = replace(spend, day=day, day_usd=0.0, day_tokens=0)
    if spend.month != month:
        spend = replace(spend, month=month, month_usd=0.0, month_tokens=0)
    return spend


def add_run(spend: Spend | None, now: datetime, tokens: int, usd: float | None) -> Spend:
    """The figures after a run that ended at `now` used `tokens` and cost `usd` (None: no
    known price: the money figures stay as they are).
    """
    current = spend_at(spend, now)
    cost = usd or 0.0
    n = min(current.est_runs + 1, ESTIMATE_RUNS)
    return replace(
        current,
        day_usd=round(current.day_usd + cost, _USD_DIGITS),
        day_tokens=current.day_tokens + tokens,
        month_usd=round(current.month_usd + cost, _USD_DIGITS),
        month_tokens=current.month_tokens + tokens,
        est_usd=round(current.est_usd + (cost - current.est_usd) / n, _USD_DIGITS),
        est_tokens=round(current.est_tokens + (tokens - current.est_tokens) / n),
        est_runs=n,
    )


def money(usd: float) -> str:
    """Dollars as notices and reasons write them: cents, or four places below a cent."""
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def over_budget(budget: Budget | None, spend: Spend | None, now: datetime) -> str | None:
    """Why a fire at `now` would pass the budget (its estimate on top of what was spent), or
    None when it fits. A job with no run yet has no estimate: its first fire runs.
    """
    if budget is None:
        return None
    s = spend_at(spend, now)
    if s.est_runs == 0:
        return None
    checks: list[tuple[float | int | None, float | int, float | int, str, bool]] = [
        (budget.tokens_run, 0, s.est_tokens, "tokens per run", False),
        (budget.tokens_day, s.day_tokens, s.est_tokens, "tokens per day", False),
        (budget.tokens_month, s.month_tokens, s.est_tokens, "tokens per month", False),
        (budget.usd_run, 0.0, s.est_usd, "per run", True),
        (budget.usd_day, s.day_usd, s.est_usd, "per day", True),
        (budget.usd_month, s.month_usd, s.est_usd, "per month", True),
    ]
    for cap, spent, estimate, what, in_usd in checks:
        if cap is None or spent + estimate <= cap:
            continue
        if in_usd:
            return (
                f"estimated {money(estimate)} for this run on top of {money(float(spent))} "
                f"spent would pass the budget of {money(float(cap))} {what}"
            )
        return (
            f"estimated {estimate:,} tokens for this run on top of {spent:,} used would "
            f"pass the budget of {cap:,} {what}"
        )
    return None


def cap_reached(budget: Budget | None, spend: Spend, tokens: int, usd: float | None) -> str | None:
    """Why the job stops after a run that used `tokens` and `usd` (`spend`: the figures with
    that run added): a cap per day or month reached, or one run at or over a cap per run.
    None: within every cap.
    """
    if budget is None:
        return None
    cost = usd or 0.0
    checks: list[tuple[float | int | None, float | int, str, bool]] = [
        (budget.tokens_run, tokens, "tokens per run", False),
        (budget.tokens_day, spend.day_tokens, "tokens per day", False),
        (budget.tokens_month, spend.month_tokens, "tokens per month", False),
        (budget.usd_run, cost, "per run", True),
        (budget.usd_day, spend.day_usd, "per day", True),
        (budget.usd_month, spend.month_usd, "per month", True),
    ]
    for cap, spent, what, in_usd in checks:
        if cap is None or spent < cap:
            continue
        if in_usd:
            return f"budget reached: {money(float(spent))} of {money(float(cap))} {what}"
        return f"budget reached: {spent:,} of {cap:,} {what}"
    return None


def skip_notice(name: str, reason: str) -> str:
    """The session's notice of the first fire of a stretch skipped for the budget."""
    return (
        f"Skipped “{name}”: {reason}. Its fires are skipped until the budget allows "
        "(a new day or month, or a higher budget)."
    )


def pause_notice(name: str, reason: str) -> str:
    """The session's notice (and channel message) of a job paused at a cap."""
    return f"Paused “{name}”: {reason}. It stays paused until someone resumes it."


def notice_meta(job_id: str, run_id: str, status: str) -> dict[str, Any]:
    """The meta of a budget notice in the transcript (a status notice, not a reply)."""
    return {
        "source": "automation",
        "automation_run_id": run_id,
        "job_id": job_id,
        "status": status,
        "budget": True,
        "_status_notice": True,
    }


def session_blocked(budget: Budget | None, spend: Spend | None, now: datetime) -> str | None:
    """Why a fire of a job of a session with `budget` (its running figures `spend`) is not
    run at `now`: a cap per day or month already reached, or the estimate of one run (the
    mean of the session's last runs) would pass a cap. None: it runs.
    """
    if budget is None:
        return None
    s = spend_at(spend, now)
    reached = cap_reached(replace(budget, usd_run=None, tokens_run=None), s, 0, None)
    return reached if reached is not None else over_budget(budget, s, now)


def with_estimates(spend: Spend | None, now: datetime, runs: int) -> Spend:
    """The figures as of `now` with `runs` more runs counted at the estimate: what a claim
    holds for a session while it plans the fires of several of its jobs at once.
    """
    s = spend_at(spend, now)
    usd, tokens = s.est_usd * runs, s.est_tokens * runs
    return replace(
        s,
        day_usd=round(s.day_usd + usd, _USD_DIGITS),
        day_tokens=s.day_tokens + tokens,
        month_usd=round(s.month_usd + usd, _USD_DIGITS),
        month_tokens=s.month_tokens + tokens,
    )


def newly_reached(
    budget: Budget | None, before: Spend, after: Spend, tokens: int, usd: float | None
) -> str | None:
    """Why a session's run is told: the figures `after` it reached a cap that the figures
    `before` it (as of its end: `spend_at(..., end)`) had not; a cap per run: every run at or
    over it. None: nothing new to tell.
    """
    if budget is None:
        return None
    reached = cap_reached(budget, after, tokens, usd)
    if reached is None:
        return None
    periods = replace(budget, usd_run=None, tokens_run=None)
    if cap_reached(periods, before, 0, None) is not None:
        return None  # the day's or month's cap was reached before this run: told then
    return reached


def session_skip_notice(name: str, reason: str) -> str:
    """The session's notice of the first fire (of any of its jobs) skipped for its budget."""
    return (
        f"Skipped “{name}”: this session's {reason}. The fires of its automations are "
        "skipped until the session's budget allows (a new day or month, or a higher budget)."
    )


def session_cap_notice(reason: str) -> str:
    """The session's notice (and channel message) of a run that reached a cap of its budget."""
    return (
        f"This session's {reason}. The fires of its automations are skipped until the budget "
        "allows (a new day or month, or a higher budget); none is paused."
    )
