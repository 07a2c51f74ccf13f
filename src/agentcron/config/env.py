"""The one reader of the process environment, and the parsers of a setting's text.

Nothing in agentcron writes the environment: a configuration file's values reach the code
through `agentcron.config.Settings` (a unit test checks both, tests/unit/test_environ.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from agentcron.errors import AgentcronError

__all__ = ["ConfigError", "env_flag", "environ", "limit", "number", "or_environ", "seconds"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class ConfigError(AgentcronError, ValueError):
    """A setting from the environment or a config file is not usable; says what is accepted."""


def environ() -> Mapping[str, str]:
    """The process environment, read-only (a live view: what it holds when it is read)."""
    return MappingProxyType(os.environ)


def or_environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    """`env`, else the process environment (what every `*_from_env(env=None)` reads)."""
    return environ() if env is None else env


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """A boolean environment setting: 1/true/yes/on or 0/false/no/off (unset = off)."""
    value = or_environ(env).get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be one of 1/true/yes/on or 0/false/no/off, got {value!r}")


def limit(env: Mapping[str, str], name: str, default: int, low: int, unit: str) -> int | None:
    """A positive count from `$name` (`low` to 10,000,000), `none`/`unlimited` for no limit;
    unset = `default`.
    """
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"none", "unlimited"}:
        return None
    if raw.isdigit() and low <= int(raw) <= 10_000_000:
        return int(raw)
    raise ConfigError(
        f"{name} must be a number of {unit} from {low} to 10000000, or none, got {raw!r}"
    )


def number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> Any:
    """`$name` as an int or a float; None when unset."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ConfigError(f"{name} must be {what}, got {raw!r}") from None


def seconds(
    env: Mapping[str, str], name: str, default: timedelta, low: float, high: float
) -> timedelta:
    """`$name` as a number of seconds from `low` to `high`; unset = `default`."""
    raw = env.get(name, "").strip()
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
