"""The relay's settings (`[relay]`): where it listens, its directory and database, its tokens'
issuer, how long a fire is retried, which callback addresses it may call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentcron.config.database import db_url
from agentcron.config.env import ConfigError, or_environ
from agentcron.config.server import data_dir

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_RELAY_PORT",
    "RelaySettings",
    "relay_home",
    "relay_settings_from_env",
]

RELAY_HOST_ENV = "AGENTCRON_RELAY_HOST"
RELAY_PORT_ENV = "AGENTCRON_RELAY_PORT"
RELAY_HOME_ENV = "AGENTCRON_RELAY_HOME"
RELAY_DB_ENV = "AGENTCRON_RELAY_DB"
RELAY_DATABASE_URL_ENV = "AGENTCRON_RELAY_DATABASE_URL"  # older than URLs in $AGENTCRON_RELAY_DB
RELAY_ISSUER_ENV = "AGENTCRON_RELAY_ISSUER"
RELAY_DEADLINE_ENV = "AGENTCRON_RELAY_DELIVERY_DEADLINE"
ALLOW_PRIVATE_ENV = "AGENTCRON_RELAY_ALLOW_PRIVATE"
DEFAULT_RELAY_HOST = "127.0.0.1"
DEFAULT_RELAY_PORT = 8330
DEFAULT_DEADLINE = 3600.0  # seconds a fire is retried before the relay gives up


def relay_home(explicit: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """`--home`, else `$AGENTCRON_RELAY_HOME`, else `relay/` in agentcron's data directory."""
    if explicit is not None:
        return explicit
    env = or_environ(env)
    home = env.get(RELAY_HOME_ENV, "").strip()
    return Path(home).expanduser() if home else data_dir(env) / "relay"


def _deadline(env: Mapping[str, str]) -> float:
    raw = env.get(RELAY_DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 7 * 86400:
        raise ConfigError(f"{RELAY_DEADLINE_ENV} is seconds from 0 to 604800, got {raw!r}")
    return value


def allow_private_from_env(env: Mapping[str, str] | None = None) -> bool:
    """`$AGENTCRON_RELAY_ALLOW_PRIVATE`: 1/true/yes/on allows; anything else does not."""
    value = or_environ(env).get(ALLOW_PRIVATE_ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class RelaySettings:
    """The relay's settings, flags over the environment over the file over the defaults."""

    host: str
    port: int
    home: Path
    issuer: str  # the `iss` of its fire tokens
    deadline: float
    allow_private: bool  # call agents back on loopback, link-local and private addresses too
    db: str | None = None  # `$AGENTCRON_RELAY_DB` as written (see `database`)
    database_url: str | None = None  # `$AGENTCRON_RELAY_DATABASE_URL` as written

    def database(self) -> str:
        """The arms' database: `$AGENTCRON_RELAY_DB` (a path or a URL, as --db is), else
        `relay.db` in the relay's directory.
        """
        return db_url(self.db or self.home / "relay.db", RELAY_DB_ENV)


def relay_settings_from_env(
    env: Mapping[str, str] | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    home: Path | None = None,
    issuer: str | None = None,
    deadline: float | None = None,
    allow_private: bool | None = None,
) -> RelaySettings:
    """The `AGENTCRON_RELAY_*` settings; each flag given wins over its variable."""
    env = or_environ(env)
    if port is None:
        raw = env.get(RELAY_PORT_ENV, "").strip()
        try:
            port = int(raw) if raw else DEFAULT_RELAY_PORT
        except ValueError:
            raise ConfigError(f"{RELAY_PORT_ENV} must be a whole number, got {raw!r}") from None
    host = host or env.get(RELAY_HOST_ENV) or DEFAULT_RELAY_HOST
    return RelaySettings(
        host=host,
        port=port,
        home=relay_home(home, env),
        issuer=issuer or env.get(RELAY_ISSUER_ENV, "").strip() or f"http://{host}:{port}",
        deadline=deadline if deadline is not None else _deadline(env),
        allow_private=allow_private if allow_private is not None else allow_private_from_env(env),
        db=env.get(RELAY_DB_ENV, "").strip() or None,
        database_url=env.get(RELAY_DATABASE_URL_ENV, "").strip() or None,
    )
