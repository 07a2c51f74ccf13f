"""The engine's settings: their defaults, and those the environment (and so the file) sets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from agentcron.config.env import ConfigError, env_flag, limit, or_environ, seconds

__all__ = [
    "DEFAULT_HISTORY_BUDGET",
    "DEFAULT_MAX_JOBS",
    "DEFAULT_MIN_INTERVAL",
    "MIN_INTERVAL_SETTING",
    "PG_CLAIM_AHEAD",
    "EngineSettings",
    "history_budget_from_env",
    "max_jobs_from_env",
    "settings_from_env",
]

MAX_JOBS_ENV = "AGENTCRON_MAX_JOBS"
DEFAULT_MAX_JOBS = 500  # seed 004
HISTORY_BUDGET_ENV = "AGENTCRON_HISTORY_BUDGET"
TAKEOVER_ENV = "AGENTCRON_TAKEOVER"  # seconds a silent replica has before it is taken over
OWNER_HEARTBEAT_ENV = "AGENTCRON_OWNER_HEARTBEAT"  # seconds between a process's heartbeats
GATES_ENV = "AGENTCRON_GATES"  # gates that run code (command, python) are allowed
# Tokens of history a turn's runner gets (estimated at 4 characters a token): well inside the
# context of any current chat model, with room for instructions, tools and the reply.
DEFAULT_HISTORY_BUDGET = 16_000
MIN_INTERVAL_ENV = "AGENTCRON_MIN_INTERVAL"
MIN_INTERVAL_SETTING = "engine.min_interval"  # its key in the file, as errors name it
# The shortest interval a schedule from a person or an agent may recur at (API, CLI, web UI,
# agent tools; the library's own `cron.jobs.create` is the operator's code and unchecked).
DEFAULT_MIN_INTERVAL = timedelta(minutes=5)


# The claim-ahead of a PostgreSQL store when the settings keep the default: a claim there takes
# ~10-20 ms of round trips (one statement ~1 ms), so 5 ms ahead left it inside each fire's
# lateness (measured: lateness p50 53 ms at 5 ms ahead, 27 ms at 50 ms; bench/bench_replicas.py).
PG_CLAIM_AHEAD = timedelta(milliseconds=50)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Engine tuning; the defaults suit one process on the embedded SQLite store."""

    batch_size: int = 500  # due jobs claimed per transaction
    lease: timedelta = timedelta(seconds=60)  # renewed every lease/3 while a fire is active
    reap_interval: timedelta = timedelta(seconds=60)  # look for other engines' dead fires
    # Every engine heartbeats its owner row this often (one UPDATE, then one indexed read for
    # owners that stopped); an owner silent for `takeover` is dead wherever it ran, and its
    # fires, turns and session leases are taken over at once (several heartbeats: a slow beat
    # must not look like a death).
    owner_heartbeat: timedelta = timedelta(seconds=1)
    takeover: timedelta = timedelta(seconds=10)
    max_concurrent_runs: int = 16  # turns running at once
    # Claim fires this much before they are due and start each at its exact time, so the
    # claim transaction and the start's write are not part of a fire's lateness. 25 ms: with
    # 5 ms the claim and the start's group commit did not always fit (lateness p99 ~4 ms, max
    # ~11 ms at 100 fires/s; with 25 ms ~1.5 / ~4 ms, bench/results/standing-20261126.md).
    # On PostgreSQL, where a claim is a few network round trips, AgentCron makes the default
    # `PG_CLAIM_AHEAD` instead.
    claim_ahead: timedelta = timedelta(milliseconds=25)
    misfire_grace: timedelta = timedelta(seconds=60)  # later than this = a missed fire
    catchup_scan_limit: int = 1000  # due fires enumerated per job and claim
    backoff: tuple[timedelta, ...] = field(
        default=(
            timedelta(seconds=30),
            timedelta(minutes=1),
            timedelta(minutes=5),
            timedelta(minutes=15),
            timedelta(hours=1),
        )
    )
    retention_runs_per_job: int = 200
    retention_age: timedelta = timedelta(days=30)
    prune_interval: timedelta = timedelta(minutes=1)
    stop_timeout: float = 30.0  # seconds a graceful stop waits for running turns
    flush_batch: int = 2000  # writes per group commit
    # A session's turn lease: renewed with the run leases while its turn runs; a process that
    # dies holding it is found at the next start (or after this long, by another process).
    turn_lease: timedelta = timedelta(minutes=5)
    turn_timeout: float | None = 1800.0  # seconds a runner call may take; None = no limit
    # Transcript entries a runner is given (a runner may say otherwise with its own
    # `history_window` attribute; 0 = none, and the transcript is not read at all).
    history_window: int = 200
    # Tokens of history within that window (a runner may say otherwise with its own
    # `history_budget`, e.g. per model). Past it the older part is compacted into a summary
    # entry by a runner that can `summarize`, else left out. None = no budget.
    history_budget: int | None = DEFAULT_HISTORY_BUDGET
    # Jobs a store may hold, system jobs not counted (seed 004: 500); every surface that
    # creates jobs (API, CLI, agent tools, library) is refused past it. None = no limit.
    max_jobs: int | None = DEFAULT_MAX_JOBS
    # The shortest interval a recurring job from the API, the CLI, the web UI or the agent's
    # tools may have (`service.job_requests.check_interval`); operators may lower it, 0: none.
    min_interval: timedelta = DEFAULT_MIN_INTERVAL
    # Alerts (service/alerts.py, with each periodic reap). A job is overdue when a fire is later
    # than its grace, max(`overdue_grace`, `overdue_grace_ratio` x its interval), unclaimed, or
    # still open past `turn_timeout` + that grace; failing after `failing_after` failed runs in
    # a row (0: never); ending when its `end_at` is within `ending_window` or it has at most
    # `ending_runs` runs left.
    overdue_grace: timedelta = timedelta(minutes=5)
    overdue_grace_ratio: float = 0.1
    failing_after: int = 3
    ending_window: timedelta = timedelta(days=1)
    ending_runs: int = 1
    # Jobs' gates that run code on this machine (a command, a Python entry point) are allowed
    # (domain/gates.py); off by default. An HTTP gate needs no setting.
    gates: bool = False


def max_jobs_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """`$AGENTCRON_MAX_JOBS`: a positive number of jobs, or `none` for no limit; unset = 500."""
    return limit(or_environ(env), MAX_JOBS_ENV, DEFAULT_MAX_JOBS, 1, "jobs")


def history_budget_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """`$AGENTCRON_HISTORY_BUDGET`: tokens of history a turn gets, or `none`; unset = 16000."""
    return limit(or_environ(env), HISTORY_BUDGET_ENV, DEFAULT_HISTORY_BUDGET, 100, "tokens")


def settings_from_env(env: Mapping[str, str] | None = None) -> EngineSettings:
    """The engine settings the environment sets (the job limit, the history budget, the
    replicas' heartbeat and takeover time, the minimum interval, whether gates may run code;
    `ConfigError` for a bad value).
    """
    env = or_environ(env)
    defaults = EngineSettings()
    settings = EngineSettings(
        max_jobs=max_jobs_from_env(env),
        history_budget=history_budget_from_env(env),
        owner_heartbeat=seconds(env, OWNER_HEARTBEAT_ENV, defaults.owner_heartbeat, 0.05, 60),
        takeover=seconds(env, TAKEOVER_ENV, defaults.takeover, 0.2, 3600),
        min_interval=seconds(env, MIN_INTERVAL_ENV, defaults.min_interval, 0, 86400),
        gates=env_flag(GATES_ENV, env),
    )
    if settings.takeover < 3 * settings.owner_heartbeat:
        raise ConfigError(
            f"{TAKEOVER_ENV} must be at least three heartbeats ({OWNER_HEARTBEAT_ENV}): "
            "a slow beat must not look like a death"
        )
    return settings
