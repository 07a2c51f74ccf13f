"""Settings with their defaults, and where the embedded database lives."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import platformdirs

DB_ENV = "AGENTCRON_DB"


def default_db_path() -> Path:
    """`$AGENTCRON_DB`, else `agentcron.db` in the user's data directory."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("agentcron")) / "agentcron.db"


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Engine tuning; the defaults suit one process on the embedded SQLite store."""

    batch_size: int = 500  # due jobs claimed per transaction
    lease: timedelta = timedelta(seconds=60)  # renewed every lease/3 while a fire is active
    reap_interval: timedelta = timedelta(seconds=60)  # look for other engines' dead fires
    max_concurrent_runs: int = 16  # turns running at once
    # Claim fires this much before they are due and start each at its exact time, so the
    # claim transaction is not part of a fire's lateness.
    claim_ahead: timedelta = timedelta(milliseconds=5)
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
    flush_batch: int = 2000  # run transitions per group commit
