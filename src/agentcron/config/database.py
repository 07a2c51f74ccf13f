"""Where the database is: a SQLite file path or a database URL, checked into one SQLAlchemy URL.

Every way of naming the database (`--db`, the deprecated `--url`, `$AGENTCRON_DB`,
`$AGENTCRON_DATABASE_URL`, the configuration file, `AgentCron(db=..., url=...)`) goes through
`db_url`, so a value is read the same everywhere and a URL is never mistaken for a file name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError

from agentcron.config.env import ConfigError, or_environ
from agentcron.config.server import data_dir

__all__ = [
    "ACCEPTED",
    "DATABASE_URL_ENV",
    "DB_ENV",
    "DatabaseTarget",
    "backend_name",
    "configured_db",
    "database_from_env",
    "db_url",
    "default_db_url",
    "describe",
    "safe_url",
    "sqlite_file",
    "store_url",
    "where",
]

DB_ENV = "AGENTCRON_DB"  # a SQLite file or a database URL
DATABASE_URL_ENV = "AGENTCRON_DATABASE_URL"  # older than URLs in $AGENTCRON_DB; still read
ACCEPTED = (
    "give a file path, sqlite:///relative/path, sqlite:////absolute/path or "
    "postgresql://user:password@host:port/dbname (postgres:// and postgresql+psycopg:// too)"
)
# A scheme of two or more characters then a colon: `C:\...` is a drive, not a scheme. Any other
# value with one is meant as a URL (a file name like that is written `./name:x.db`).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
_SQLITE = "sqlite"
_POSTGRES = ("postgresql", "postgres", "postgresql+psycopg")
_PG_DRIVER = "postgresql+psycopg"  # the driver the store uses (psycopg 3)
# Who and the password, in a value too broken to parse: everything from the scheme to the `@`.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*:/*)[^@]*@")


def db_url(value: str | os.PathLike[str], source: str = "--db") -> str:
    """The SQLAlchemy URL of `value`: a file path (a SQLite file, `~` expanded), or
    `sqlite:///path`, or a PostgreSQL URL (`postgresql://`, `postgres://`,
    `postgresql+psycopg://`, all made `postgresql+psycopg://`).

    Raises ConfigError, one line naming `source` and the value (password hidden) and saying
    what is accepted, for an empty value, an in-memory SQLite database, another kind of
    database or anything else that looks like a URL and is not one of these.
    """
    text = os.fspath(value).strip()
    if not text:
        raise ConfigError(f"{source} is empty; {ACCEPTED}")
    scheme = _SCHEME.match(text)
    if scheme is None:
        return _file_url(Path(text))

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"{source} {_shown(text)!r} {why}; {ACCEPTED}")

    name = scheme.group(1).lower()
    if not text[scheme.end() :].startswith("//"):
        raise refuse(f"is not a URL ({name}://...) nor a file path")
    try:
        url = sa.make_url(text)
    except ArgumentError:
        raise refuse("is not a valid URL") from None
    except ValueError as exc:  # a port that is not a number
        raise refuse(f"is not a valid URL ({exc})") from None
    driver = url.drivername.lower()
    if driver == _SQLITE:
        if url.host or url.port or url.username:
            raise refuse("names a host: a SQLite file is sqlite:///relative or sqlite:////absolute")
        if not url.database or url.database == ":memory:":
            raise refuse("is an in-memory database, gone when the process ends")
        if url.query:
            raise refuse("has options (?...): a SQLite URL is its file's path only")
        return _file_url(Path(url.database))
    if driver in _POSTGRES:
        if not url.host and not url.database:
            raise refuse("names no server and no database")
        return url.set(drivername=_PG_DRIVER).render_as_string(hide_password=False)
    raise refuse(f"is a kind of database agentcron does not run on ({driver})")


def _file_url(path: Path) -> str:
    """A SQLite file's URL (the path percent-encoded where a URL needs it: `?`, `#`, `%`)."""
    return sa.URL.create(_SQLITE, database=str(path.expanduser())).render_as_string()


def _shown(text: str) -> str:
    """A value as a message may show it: as given, but a password in it replaced by ***."""
    try:
        url = sa.make_url(text)
    except (ArgumentError, ValueError):
        return _USERINFO.sub(r"\1***@", text)
    return text if url.password is None else url.render_as_string(hide_password=True)


def store_url(db: str | os.PathLike[str] | None, url: str | None) -> str:
    """The store's URL for `AgentCron(db=..., url=...)`: either one through `db_url` (`url`
    being the older name), else `default_db_url()`.
    """
    if url is not None:
        return db_url(url, "url")
    return db_url(db, "db") if db is not None else default_db_url()


def default_db_url(environ: Mapping[str, str] | None = None) -> str:
    """`$AGENTCRON_DB` (a path or a URL), else `agentcron.db` in the data directory."""
    env = or_environ(environ)
    value = env.get(DB_ENV, "")
    return db_url(value, DB_ENV) if value.strip() else _file_url(data_dir(env) / "agentcron.db")


def configured_db(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The database `serve` and `db upgrade` use when no flag names one, and the environment
    variable it came from (None = the default file): `$AGENTCRON_DATABASE_URL`, else
    `$AGENTCRON_DB`, else `agentcron.db` in the data directory.
    """
    env = or_environ(environ)
    for name in (DATABASE_URL_ENV, DB_ENV):
        if env.get(name, "").strip():
            return db_url(env[name], name), name
    return default_db_url(env), None


@dataclass(frozen=True, slots=True)
class DatabaseTarget:
    """The database the settings name: its SQLAlchemy URL and the environment variable (the
    file's key of the same name) it came from; None = the default file in the data directory.
    """

    url: str
    env: str | None = None


def database_from_env(
    environ: Mapping[str, str] | None = None, *, url_env: bool = True
) -> DatabaseTarget:
    """`configured_db` (`url_env`: `$AGENTCRON_DATABASE_URL` counts, as for `serve`), or
    `default_db_url` (`$AGENTCRON_DB` only, as for the demo and the library).
    """
    if url_env:
        return DatabaseTarget(*configured_db(environ))
    env = or_environ(environ)
    return DatabaseTarget(default_db_url(env), DB_ENV if env.get(DB_ENV, "").strip() else None)


def backend_name(url: str) -> str:
    """`sqlite` or `postgresql`."""
    return sa.make_url(url).get_backend_name()


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL; None for another database."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != _SQLITE or not parsed.database:
        return None
    return Path(parsed.database)


def safe_url(url: str) -> str:
    """A URL fit for a message or a log: its password hidden."""
    return _shown(url)


def where(url: str) -> str:
    """The database as messages name it: a SQLite file's path, else its URL, password hidden."""
    path = sqlite_file(url)
    return str(path) if path is not None else safe_url(url)


def describe(url: str) -> str:
    """The backend and the database, for start-up lines: `SQLite file agentcron.db`,
    `PostgreSQL postgresql+psycopg://user:***@host/db`.
    """
    path = sqlite_file(url)
    if path is not None:
        return f"SQLite file {path}"
    kind = "PostgreSQL" if backend_name(url) == "postgresql" else backend_name(url)
    return f"{kind} {safe_url(url)}"
