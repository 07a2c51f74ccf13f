"""The server's settings, the data directory and its tokens, the sessions' mode, the CLI's API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import platformdirs

from agentcron.config.env import ConfigError, env_flag, or_environ

__all__ = [
    "DEFAULT_API",
    "DEFAULT_HOST",
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_PORT",
    "HOME_ENV",
    "LOCAL_TZ_ENV",
    "PUBLIC_URL_ENV",
    "SHARED_CHAT_ENV",
    "UNIFIED_ENV",
    "UNIFIED_SESSION_KEY",
    "UNIFIED_SESSION_TITLE",
    "CliSettings",
    "DataSettings",
    "ServerSettings",
    "SessionSettings",
    "check_public_url",
    "cli_settings_from_env",
    "data_dir",
    "data_settings_from_env",
    "local_zone",
    "public_url_from_env",
    "server_settings_from_env",
    "session_settings_from_env",
]

HOME_ENV = "AGENTCRON_HOME"
TOKEN_ENV = "AGENTCRON_TOKEN"
HOOK_TOKEN_ENV = "AGENTCRON_HOOK_TOKEN"
HOST_ENV = "AGENTCRON_HOST"
PORT_ENV = "AGENTCRON_PORT"
LOG_LEVEL_ENV = "AGENTCRON_LOG_LEVEL"
PUBLIC_URL_ENV = "AGENTCRON_PUBLIC_URL"
UNIFIED_ENV = "AGENTCRON_UNIFIED_SESSION"
SHARED_CHAT_ENV = "AGENTCRON_UNIFIED_SHARED_CHAT"
URL_ENV = "AGENTCRON_URL"
DEFAULT_HOST = "127.0.0.1"  # local only unless asked: the API can make the agent act
DEFAULT_PORT = 8321
DEFAULT_LOG_LEVEL = "info"
DEFAULT_API = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
UNIFIED_SESSION_KEY = "unified:default"
UNIFIED_SESSION_TITLE = "Shared automations (unified mode)"


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where agentcron keeps its files (database, tokens): `$AGENTCRON_HOME`, else the user's
    data directory.
    """
    home = or_environ(env).get(HOME_ENV)
    if home:
        return Path(home).expanduser()
    return Path(platformdirs.user_data_dir("agentcron"))


@dataclass(frozen=True, slots=True)
class DataSettings:
    """The data directory and the tokens the settings give (None: the token file's)."""

    dir: Path
    token: str | None = field(default=None, repr=False)
    hook_token: str | None = field(default=None, repr=False)


def data_settings_from_env(env: Mapping[str, str] | None = None) -> DataSettings:
    """`AGENTCRON_HOME`, `AGENTCRON_TOKEN`, `AGENTCRON_HOOK_TOKEN`."""
    env = or_environ(env)
    return DataSettings(
        dir=data_dir(env),
        token=env.get(TOKEN_ENV, "").strip() or None,
        hook_token=env.get(HOOK_TOKEN_ENV, "").strip() or None,
    )


def check_public_url(value: str, *, setting: str = PUBLIC_URL_ENV) -> str:
    """An http(s) base URL with a host and no query or fragment, without its trailing `/`."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(
            f"{setting} must be the server's base URL as others reach it, http:// or https:// "
            f"with a host and no query, e.g. https://cron.example.org; got {value!r}"
        )
    return value.strip().rstrip("/")


def public_url_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """`AGENTCRON_PUBLIC_URL`, checked; None when unset."""
    value = or_environ(env).get(PUBLIC_URL_ENV, "").strip()
    return check_public_url(value) if value else None


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What `serve` binds and how others reach it."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    log_level: str = DEFAULT_LOG_LEVEL
    public_url: str | None = None  # checked (check_public_url): decision URLs start with it


def server_settings_from_env(
    env: Mapping[str, str] | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str | None = None,
) -> ServerSettings:
    """`AGENTCRON_HOST`, `AGENTCRON_PORT`, `AGENTCRON_LOG_LEVEL`, `AGENTCRON_PUBLIC_URL`; the
    flags (`host`, `port`, `log_level`) win over them.
    """
    env = or_environ(env)
    if port is None:
        raw = env.get(PORT_ENV, "").strip()
        if raw:
            try:
                port = int(raw)
            except ValueError:
                raise ConfigError(f"{PORT_ENV} must be a whole number, got {raw!r}") from None
    return ServerSettings(
        host=host or env.get(HOST_ENV) or DEFAULT_HOST,
        port=DEFAULT_PORT if port is None else port,
        log_level=log_level or env.get(LOG_LEVEL_ENV) or DEFAULT_LOG_LEVEL,
        public_url=public_url_from_env(env),
    )


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """How sessions share memory: `unified`, the web chats and the shared automations' session
    (`unified:default`) are one memory. `shared_chat`: a shared automation's reply goes to
    `unified:default` (the "Shared automations" chat), not to the thread the person last
    talked in.
    """

    unified: bool = False
    shared_chat: bool = False


def session_settings_from_env(
    env: Mapping[str, str] | None = None,
    *,
    unified: bool | None = None,
    shared_chat: bool | None = None,
) -> SessionSettings:
    """`AGENTCRON_UNIFIED_SESSION` and `AGENTCRON_UNIFIED_SHARED_CHAT` (1/true/yes/on or
    0/false/no/off); a flag or argument wins over them.
    """
    return SessionSettings(
        env_flag(UNIFIED_ENV, env) if unified is None else unified,
        env_flag(SHARED_CHAT_ENV, env) if shared_chat is None else shared_chat,
    )


@dataclass(frozen=True, slots=True)
class CliSettings:
    """The server the CLI talks to when no `--db` names a database, and the zone it shows
    times in where no job's zone applies.
    """

    url: str = DEFAULT_API
    tz: str = "UTC"


LOCAL_TZ_ENV = "TZ"  # the standard variable; `[cli] tz` in the file


def _zone_name(text: str) -> str | None:
    """An IANA zone name from a $TZ value or a zoneinfo path ("Europe/Berlin",
    ":Europe/Berlin", "/usr/share/zoneinfo/Europe/Berlin"); None when it names no zone.
    """
    name = text.strip().removeprefix(":")
    marker = "zoneinfo/"
    if name.startswith("/") and marker in name:
        name = name.rsplit(marker, 1)[1]
    if not name or name.startswith("/"):
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return "UTC" if name in {"Etc/UTC", "UCT", "Etc/UCT", "Universal", "Zulu"} else name


def _machine_zone(localtime: Path) -> str | None:
    """The zone `localtime` (normally /etc/localtime) links to, or /etc/timezone names."""
    try:
        target = str(localtime.resolve(strict=True))
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        return _zone_name(target)
    try:
        return _zone_name((localtime.parent / "timezone").read_text(encoding="utf-8"))
    except OSError:
        return None


def local_zone(
    env: Mapping[str, str] | None = None, *, localtime: Path = Path("/etc/localtime")
) -> str:
    """The zone a person at this machine reads times in: $TZ (`[cli] tz`) when it names an
    IANA zone, else the machine's zone, else UTC.
    """
    given = or_environ(env).get(LOCAL_TZ_ENV, "")
    return (given and _zone_name(given)) or _machine_zone(localtime) or "UTC"


def cli_settings_from_env(
    env: Mapping[str, str] | None = None, *, url: str | None = None
) -> CliSettings:
    """`AGENTCRON_URL` (the flag `--api` wins over it) and the local zone ($TZ, else the
    machine's)."""
    env = or_environ(env)
    return CliSettings(url or env.get(URL_ENV) or DEFAULT_API, local_zone(env))
