"""`config.database.db_url`: a file path or a database URL becomes one SQLAlchemy URL, else one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcron.app import AgentCron
from agentcron.cli import app
from agentcron.config import ConfigError
from agentcron.config.database import (
    ACCEPTED,
    configured_db,
    db_url,
    default_db_url,
    describe,
    safe_url,
    sqlite_file,
    where,
)
from agentcron.config.file import SETTINGS

CLEAN: dict[str, str | None] = {s.env: None for s in SETTINGS} | {"AGENTCRON_CONFIG": None}
HOME = str(Path.home())


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("agentcron.db", "sqlite:///agentcron.db"),
        ("data/a b.db", "sqlite:///data/a b.db"),
        ("/srv/agentcron.db", "sqlite:////srv/agentcron.db"),
        ("~/x.db", f"sqlite:///{HOME}/x.db"),
        ("  /srv/x.db  ", "sqlite:////srv/x.db"),  # pasted with spaces
        ("./odd:name.db", "sqlite:///odd%3Aname.db"),  # a colon in a file name: ./ first
        ("/srv/what?.db", "sqlite:////srv/what%3F.db"),  # escaped, read back as the same file
        (Path("rel/x.db"), "sqlite:///rel/x.db"),
        ("sqlite:///rel.db", "sqlite:///rel.db"),
        ("sqlite:////abs/x.db", "sqlite:////abs/x.db"),
        ("SQLITE:////abs/x.db", "sqlite:////abs/x.db"),
        ("sqlite:///~/x.db", f"sqlite:///{HOME}/x.db"),
        ("postgresql://u:pw@db.example:5432/cron", "postgresql+psycopg://u:pw@db.example:5432/cron"),
        ("postgres://u@db/cron", "postgresql+psycopg://u@db/cron"),
        ("postgresql+psycopg://u@db/cron?sslmode=require",
         "postgresql+psycopg://u@db/cron?sslmode=require"),
        ("postgresql:///cron", "postgresql+psycopg:///cron"),  # the local socket
        ("postgresql://u:p%40ss@db/cron", "postgresql+psycopg://u:p%40ss@db/cron"),
    ],
)  # fmt: skip
def test_accepted_values_become_one_url(value: str | Path, url: str) -> None:
    assert db_url(value) == url


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "--db is empty; give a file path"),
        ("   ", "--db is empty; give a file path"),
        ("mysql://u@h/d", "--db 'mysql://u@h/d' is a kind of database agentcron does not run on"),
        ("http://example.com/db", "is a kind of database agentcron does not run on (http)"),
        ("postgresql+asyncpg://u@h/d", "does not run on (postgresql+asyncpg)"),
        ("postgresql:/x", "--db 'postgresql:/x' is not a URL (postgresql://...) nor a file path"),
        ("postgres:u@h/d", "is not a URL (postgres://...)"),
        ("localhost:5432/cron", "is not a URL (localhost://...)"),  # the scheme forgotten
        (Path("postgresql://u@h/d"), "'postgresql:/***@h/d' is not a URL"),  # pathlib ate a /
        ("postgresql://h:port/d", "is not a valid URL"),
        ("postgresql://", "names no server and no database"),
        ("sqlite://", "is an in-memory database"),
        ("sqlite:///:memory:", "is an in-memory database"),
        ("sqlite://x.db", "names a host"),
        ("sqlite:///x.db?mode=memory", "has options"),
    ],
)
def test_refused_values_say_so_in_one_line_naming_the_value(value: str | Path, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        db_url(value)
    message = str(caught.value)
    assert why in message
    assert message.endswith(ACCEPTED)
    assert "\n" not in message


@pytest.mark.parametrize(
    "value",
    ["mysql://root:hunter2@h/d", "postgresql:/root:hunter2@h/d", "postgresql://root:hunter2@h:x/d"],
)
def test_a_refused_value_never_shows_its_password(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        db_url(value, "AGENTCRON_DB")
    assert str(caught.value).startswith("AGENTCRON_DB '")
    assert "hunter2" not in str(caught.value)
    assert "***@h" in str(caught.value)


def test_messages_name_the_database_without_its_password() -> None:
    pg = db_url("postgres://root:hunter2@db/cron")
    assert safe_url(pg) == where(pg) == "postgresql+psycopg://root:***@db/cron"
    assert describe(pg) == "PostgreSQL postgresql+psycopg://root:***@db/cron"
    assert sqlite_file(pg) is None
    file = db_url("/srv/what?.db")
    assert sqlite_file(file) == Path("/srv/what?.db")
    assert where(file) == "/srv/what?.db"
    assert describe(file) == "SQLite file /srv/what?.db"


def test_the_environment_names_the_default_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCRON_HOME", str(tmp_path))  # the data directory
    home = {"AGENTCRON_HOME": str(tmp_path)}
    assert default_db_url(home) == f"sqlite:///{tmp_path}/agentcron.db"
    assert configured_db(home) == (f"sqlite:///{tmp_path}/agentcron.db", None)
    env = home | {"AGENTCRON_DB": "postgres://u@db/cron"}
    assert default_db_url(env) == "postgresql+psycopg://u@db/cron"
    assert configured_db(env) == ("postgresql+psycopg://u@db/cron", "AGENTCRON_DB")
    older = env | {"AGENTCRON_DATABASE_URL": "postgresql://u@other/cron"}
    assert configured_db(older) == ("postgresql+psycopg://u@other/cron", "AGENTCRON_DATABASE_URL")
    with pytest.raises(ConfigError, match=r"^AGENTCRON_DB 'mysql://u@db/x' is a kind"):
        default_db_url(home | {"AGENTCRON_DB": "mysql://u@db/x"})


def test_the_library_takes_a_url_as_db_and_refuses_what_is_neither(tmp_path: Path) -> None:
    assert AgentCron(db="postgres://u@db/cron").store.dialect == "postgresql"
    assert AgentCron(url="postgresql://u@db/cron").store.dialect == "postgresql"  # the older name
    assert AgentCron(db=tmp_path / "x.db").store.dialect == "sqlite"
    with pytest.raises(ConfigError, match=r"^db 'mysql://u:\*\*\*@db/x' is a kind of database"):
        AgentCron(db="mysql://u:pw@db/x")
    with pytest.raises(ConfigError, match=r"^url 'sqlite://' is an in-memory database"):
        AgentCron(url="sqlite://")
    assert not list(tmp_path.iterdir())  # nothing opened, nothing created


BAD = ["mysql://root:hunter2@h/d", "postgresql:/x", "", "sqlite://", "http://example.com"]
COMMANDS = [
    ["db", "upgrade"],
    ["serve"],
    ["demo"],
    ["relay", "serve"],
    ["jobs", "list"],
    ["sessions", "add", "api:x"],
    ["approvals", "list"],
]


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_db_flag_refuses_a_bad_value_with_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], value: str
) -> None:
    monkeypatch.chdir(tmp_path)
    env = CLEAN | {"AGENTCRON_HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(app, [*command, "--db", value], env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --db ")
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    assert ACCEPTED in result.stderr
    assert "hunter2" not in result.output
    assert list(tmp_path.iterdir()) == []  # no `postgresql:` directory, no home, no file


@pytest.mark.parametrize("command", [["db", "upgrade"], ["serve"]], ids=" ".join)
def test_a_bad_agentcron_db_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    env = CLEAN | {"AGENTCRON_HOME": str(tmp_path / "home"), "AGENTCRON_DB": "postgresql:/x"}
    result = CliRunner().invoke(app, command, env=env)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: AGENTCRON_DB 'postgresql:/x' is not a URL")
    assert result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_the_demo_keeps_to_its_own_database_unless_db_names_one(tmp_path: Path) -> None:
    home, served = tmp_path / "home", tmp_path / "serve.db"
    env = CLEAN | {"AGENTCRON_HOME": str(home), "AGENTCRON_DB": str(served)}
    result = CliRunner().invoke(app, ["demo", "--say", "hello", "--wps", "0"], env=env)
    assert result.exit_code == 1  # "hello" schedules nothing: the demo says so, quickly
    assert f"database: {home / 'demo.db'}" in result.stdout
    assert not served.exists()  # serve's database: untouched
    named = tmp_path / "named.db"
    asked = CliRunner().invoke(app, ["demo", "--say", "hi", "--wps", "0", "--db", str(named)])
    assert asked.exit_code == 1
    assert named.exists()


def test_a_bad_server_db_in_the_file_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "agentcron.toml"
    path.write_text('[server]\ndb = "mysql://root:hunter2@h/d"\n')
    result = CliRunner().invoke(app, ["--config", str(path), "config", "show"], env=CLEAN)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: server.db 'mysql://root:***@h/d' is a kind")
    assert "hunter2" not in result.output


def test_the_deprecated_url_flag_warns_and_both_flags_are_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    made = CliRunner().invoke(
        app, ["sessions", "add", "api:x", "--url", f"sqlite:///{db}"], env=CLEAN
    )
    assert made.exit_code == 0, made.output
    assert made.stderr == "warning: --url is deprecated: --db takes URLs too\n"
    listed = CliRunner().invoke(
        app, ["sessions", "list", "--db", f"sqlite:///{db}", "--json"], env=CLEAN
    )
    assert [s["key"] for s in json.loads(listed.stdout)] == ["api:x"]
    both = CliRunner().invoke(app, ["serve", "--db", db, "--url", f"sqlite:///{db}"], env=CLEAN)
    assert both.exit_code == 2
    assert "give --db or --url, not both" in both.stderr
    bad = CliRunner().invoke(app, ["jobs", "list", "--url", "mysql://h/d"], env=CLEAN)
    assert bad.exit_code == 2
    assert "error: --url 'mysql://h/d' is a kind of database" in bad.stderr
