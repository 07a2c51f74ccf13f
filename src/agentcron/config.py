"""Settings with their defaults, and where the embedded database lives."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import platformdirs

from agentcron.errors import AgentcronError, InvalidInputError

DB_ENV = "AGENTCRON_DB"  # a SQLite file or a database URL: `agentcron.db_target` reads it
PRICES_ENV = "AGENTCRON_PRICES"
UNIFIED_ENV = "AGENTCRON_UNIFIED_SESSION"
MAX_JOBS_ENV = "AGENTCRON_MAX_JOBS"
DEFAULT_MAX_JOBS = 500  # seed 004
HISTORY_BUDGET_ENV = "AGENTCRON_HISTORY_BUDGET"
TAKEOVER_ENV = "AGENTCRON_TAKEOVER"  # seconds a silent replica has before it is taken over
OWNER_HEARTBEAT_ENV = "AGENTCRON_OWNER_HEARTBEAT"  # seconds between a process's heartbeats
MODEL_ENV = "AGENTCRON_MODEL"
# Tokens of history a turn's runner gets (estimated at 4 characters a token): well inside the
# context of any current chat model, with room for instructions, tools and the reply.
DEFAULT_HISTORY_BUDGET = 16_000
UNIFIED_SESSION_KEY = "unified:default"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


HOME_ENV = "AGENTCRON_HOME"


def data_dir() -> Path:
    """Where agentcron keeps its files (database, tokens): `$AGENTCRON_HOME`, else the user's
    data directory.
    """
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("agentcron"))


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
    # claim transaction is not part of a fire's lateness. On PostgreSQL, where a claim is a
    # few network round trips, AgentCron makes the default `PG_CLAIM_AHEAD` instead.
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


class ConfigError(AgentcronError, ValueError):
    """A setting from the environment or a config file is not usable; says what is accepted."""


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """A boolean environment setting: 1/true/yes/on or 0/false/no/off (unset = off)."""
    value = (os.environ if env is None else env).get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be one of 1/true/yes/on or 0/false/no/off, got {value!r}")


def _limit_from_env(
    env: Mapping[str, str] | None, name: str, default: int, low: int, unit: str
) -> int | None:
    """A positive count from `$name` (`low` to 10,000,000), `none`/`unlimited` for no limit;
    unset = `default`.
    """
    raw = (os.environ if env is None else env).get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"none", "unlimited"}:
        return None
    if raw.isdigit() and low <= int(raw) <= 10_000_000:
        return int(raw)
    raise ConfigError(
        f"{name} must be a number of {unit} from {low} to 10000000, or none, got {raw!r}"
    )


def max_jobs_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """`$AGENTCRON_MAX_JOBS`: a positive number of jobs, or `none` for no limit; unset = 500."""
    return _limit_from_env(env, MAX_JOBS_ENV, DEFAULT_MAX_JOBS, 1, "jobs")


def history_budget_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """`$AGENTCRON_HISTORY_BUDGET`: tokens of history a turn gets, or `none`; unset = 16000."""
    return _limit_from_env(env, HISTORY_BUDGET_ENV, DEFAULT_HISTORY_BUDGET, 100, "tokens")


_MAX_MODEL_NAME = 200


def check_model_name(name: str | None) -> str | None:
    """A model name as given to a job ("provider:name", e.g. "openai:gpt-4o", or "offline"):
    stripped, blank = None (the runner's default); refused when too long or with spaces.
    """
    if name is None or not name.strip():
        return None
    name = name.strip()
    if len(name) > _MAX_MODEL_NAME or any(c.isspace() or not c.isprintable() for c in name):
        raise InvalidInputError(
            f"a model name is 1 to {_MAX_MODEL_NAME} printable characters without spaces, "
            f"e.g. openai:gpt-4o or offline; got {name[:40]!r}"
        )
    return name


DEFAULT_MAX_STEPS = 25  # model requests per turn (seed 004)
THINKING_LEVELS = ("off", "on", "minimal", "low", "medium", "high", "xhigh", "max")
SYSTEM_PROMPT_ENV = "AGENTCRON_SYSTEM_PROMPT"
TEMPERATURE_ENV = "AGENTCRON_TEMPERATURE"
MAX_TOKENS_ENV = "AGENTCRON_MAX_TOKENS"
THINKING_ENV = "AGENTCRON_THINKING"
MAX_STEPS_ENV = "AGENTCRON_MAX_STEPS"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The built-in agent's settings (seed 004: agent config). None = the model's own default;
    `model` None = `$AGENTCRON_MODEL`, else the offline model. A job's `model` overrides it.
    """

    model: str | None = None
    system_prompt: str | None = None  # None = the built-in prompt
    temperature: float | None = None  # 0 to 2
    max_tokens: int | None = None  # of one model response
    thinking: str | None = None  # one of THINKING_LEVELS, where the provider supports it
    max_steps: int = DEFAULT_MAX_STEPS  # model requests per turn; reaching it still succeeds

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise ConfigError(f"temperature must be from 0 to 2, got {self.temperature}")
        if self.max_tokens is not None and not 1 <= self.max_tokens <= 1_000_000:
            raise ConfigError(f"max_tokens must be from 1 to 1000000, got {self.max_tokens}")
        if self.thinking is not None and self.thinking not in THINKING_LEVELS:
            raise ConfigError(
                f"thinking must be one of {', '.join(THINKING_LEVELS)}, got {self.thinking!r}"
            )
        if not 1 <= self.max_steps <= 1000:
            raise ConfigError(f"max_steps must be from 1 to 1000, got {self.max_steps}")
        check_model_name(self.model)


def _number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ConfigError(f"{name} must be {what}, got {raw!r}") from None


def agent_settings_from_env(env: Mapping[str, str] | None = None) -> AgentSettings:
    """The agent settings the environment sets (`AGENTCRON_MODEL`, `AGENTCRON_SYSTEM_PROMPT`,
    `AGENTCRON_TEMPERATURE`, `AGENTCRON_MAX_TOKENS`, `AGENTCRON_THINKING`, `AGENTCRON_MAX_STEPS`).
    """
    env = os.environ if env is None else env
    steps = _number(env, MAX_STEPS_ENV, int)
    try:
        return AgentSettings(
            model=check_model_name(env.get(MODEL_ENV)),
            system_prompt=env.get(SYSTEM_PROMPT_ENV) or None,
            temperature=_number(env, TEMPERATURE_ENV, float),
            max_tokens=_number(env, MAX_TOKENS_ENV, int),
            thinking=env.get(THINKING_ENV, "").strip().lower() or None,
            max_steps=DEFAULT_MAX_STEPS if steps is None else steps,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _seconds_from_env(
    env: Mapping[str, str] | None, name: str, default: timedelta, low: float, high: float
) -> timedelta:
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # also refuses nan and inf
        raise ConfigError(
            f"{name} must be a number of seconds from {low:g} to {high:g}, got {raw!r}"
        )
    return timedelta(seconds=value)


def settings_from_env(env: Mapping[str, str] | None = None) -> EngineSettings:
    """The engine settings the environment sets (the job limit, the history budget, the
    replicas' heartbeat and takeover time; `ConfigError` for a bad value).
    """
    defaults = EngineSettings()
    settings = EngineSettings(
        max_jobs=max_jobs_from_env(env),
        history_budget=history_budget_from_env(env),
        owner_heartbeat=_seconds_from_env(
            env, OWNER_HEARTBEAT_ENV, defaults.owner_heartbeat, 0.05, 60
        ),
        takeover=_seconds_from_env(env, TAKEOVER_ENV, defaults.takeover, 0.2, 3600),
    )
    if settings.takeover < 3 * settings.owner_heartbeat:
        raise ConfigError(
            f"{TAKEOVER_ENV} must be at least three heartbeats ({OWNER_HEARTBEAT_ENV}): "
            "a slow beat must not look like a death"
        )
    return settings


def load_price_table(
    source: str | Path | Mapping[str, Mapping[str, float]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Mapping[str, Mapping[str, float]]:
    """The per-model price table: a mapping, a JSON file, or the file named by $AGENTCRON_PRICES.

    The file holds `{"provider:model": {"input_per_mtok": 0.4, "output_per_mtok": 1.6}, ...}`
    (USD per million tokens). It overrides the maintained table of `genai-prices`; a model in
    neither is "unpriced" (its cost is None, never 0).
    """
    if isinstance(source, Mapping):
        return source
    path = source if source is not None else (os.environ if env is None else env).get(PRICES_ENV)
    if not path:
        return {}
    try:
        data = json.loads(Path(path).expanduser().read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the price table {str(path)!r}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the price table {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"the price table {str(path)!r} must be a JSON object of "
            '{"provider:model": {"input_per_mtok": x, "output_per_mtok": y}}'
        )
    return data
