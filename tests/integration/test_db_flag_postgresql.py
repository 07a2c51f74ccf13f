"""`--db`, `$AGENTCRON_DB` and `AgentCron(db=...)` with a PostgreSQL URL run on PostgreSQL (real,
a scratch database per test), never on a SQLite file in a directory named `postgresql:`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from typer.testing import CliRunner, Result

import agentcron
from agentcron.app import AgentCron
from agentcron.cli import app
from agentcron.config.file import SETTINGS
from agentcron.relay.server import RelayOptions
from agentcron.relay.server import build as build_relay
from agentcron.server.serve import ServeOptions, build
from agentcron.store.migrate import alembic_config
from tests.conftest import _scratch_pg_database

CLEAN: dict[str, str | None] = {s.env: None for s in SETTINGS} | {"AGENTCRON_CONFIG": None}
PASSWORD = "s3cret-Pw"  # trust auth ignores it; it must never be printed
HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


@pytest.fixture
def pg() -> Iterator[str]:
    """A scratch database's URL, with a password in it (kept if the server's URL has one)."""
    for url in _scratch_pg_database():
        parsed = sa.make_url(url)
        if parsed.password is None:
            parsed = parsed.set(password=PASSWORD)
        yield parsed.render_as_string(hide_password=False)


@pytest.fixture(autouse=True)
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory: where the old `--db postgresql://...` made its directory."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("AGENTCRON_HOME", str(tmp_path / "home"))
    for name in ("AGENTCRON_DB", "AGENTCRON_DATABASE_URL", "AGENTCRON_TOKEN", "AGENTCRON_URL"):
        monkeypatch.delenv(name, raising=False)
    return work


def cli(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def shown(url: str) -> str:
    """The URL as agentcron prints it: the psycopg driver named, the password hidden."""
    parsed = sa.make_url(url).set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=True)


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    libpq = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq) as conn:
        return list(conn.execute(query).fetchall())


def tables(url: str) -> set[str]:
    found = rows(
        url, "select table_name from information_schema.tables where table_schema = 'public'"
    )
    return {name for (name,) in found}


@pytest.mark.postgres
def test_db_upgrade_with_a_postgresql_url_upgrades_postgresql(pg: str, cwd: Path) -> None:
    assert tables(pg) == set()
    legacy = pg.replace("postgresql://", "postgres://", 1)  # Heroku's spelling, normalised
    for _ in range(2):  # creating, then upgrading an up-to-date database
        result = cli("db", "upgrade", "--db", legacy)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"{shown(pg)}: schema at revision {HEAD} (0 jobs, 0 runs)\n"
        assert PASSWORD not in result.output
    assert {"jobs", "runs", "sessions", "alembic_version"} <= tables(pg)
    assert rows(pg, "select version_num from alembic_version") == [(HEAD,)]
    assert list(cwd.iterdir()) == []  # no `postgres:` directory, no SQLite file


@pytest.mark.postgres
def test_agentcron_db_with_a_url_is_the_database_of_db_upgrade_serve_and_config_show(
    pg: str, cwd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = CLEAN | {"AGENTCRON_HOME": str(tmp_path / "home"), "AGENTCRON_DB": pg}
    upgraded = cli("db", "upgrade", env=env)
    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.stdout.startswith(f"{shown(pg)}: schema at revision {HEAD}")
    assert "jobs" in tables(pg)
    shown_config = cli("config", "show", env=env)
    assert f"database: PostgreSQL {shown(pg)}  (env: server.db, $AGENTCRON_DB)\n" in (
        shown_config.stdout
    )
    assert PASSWORD not in shown_config.output
    as_json = json.loads(cli("config", "show", "--json", env=env).stdout)
    assert as_json["database"] == {
        "backend": "postgresql", "database": shown(pg), "describe": f"PostgreSQL {shown(pg)}",
        "source": "env", "setting": "server.db", "env": "AGENTCRON_DB",
    }  # fmt: skip
    settings = {r["key"]: r["value"] for r in as_json["settings"]}
    assert settings["server.db"] == sa.make_url(pg).render_as_string()  # the password hidden
    monkeypatch.setenv("AGENTCRON_DB", pg)
    server = build(ServeOptions(home=tmp_path / "home"))  # what `serve` builds without --db
    assert server.cron.store.dialect == "postgresql"
    assert server.where == f"PostgreSQL {shown(pg)}"
    assert list(cwd.iterdir()) == []


@pytest.mark.postgres
def test_the_cli_database_backend_on_postgresql_and_the_deprecated_url(pg: str, cwd: Path) -> None:
    added = cli("sessions", "add", "api:ops", "--tz", "Europe/Berlin", "--db", pg)
    assert added.exit_code == 0, added.output
    job = cli("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
              "--when", "every weekday at 9", "--db", pg, "--json")  # fmt: skip
    assert job.exit_code == 0, job.output
    assert rows(pg, "select session_key, name from jobs") == [("api:ops", "build")]
    old = cli("jobs", "list", "--url", pg, "--json")  # the older flag still works, and says so
    assert old.exit_code == 0, old.output
    assert [j["name"] for j in json.loads(old.stdout)] == ["build"]
    assert old.stderr == "warning: --url is deprecated: --db takes URLs too\n"
    assert list(cwd.iterdir()) == []


def test_a_database_that_does_not_answer_is_one_line_without_the_password(cwd: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/nowhere"
    for args in (("jobs", "list"), ("db", "upgrade")):
        result = cli(*args, "--db", url)
        assert result.exit_code == 1
        assert result.stderr.startswith(f"error: cannot open the database {shown(url)}: ")
        assert result.stderr.count("\n") == 1, result.stderr
        assert PASSWORD not in result.output


@pytest.mark.postgres
async def test_the_library_takes_a_postgresql_url_as_db(pg: str) -> None:
    async def runner(trigger: object) -> str:
        return "ok"

    async with AgentCron(db=pg, runner=runner) as cron:
        assert cron.store.dialect == "postgresql"
        await cron.sessions.create("api:lib")
    assert rows(pg, "select session_key from sessions") == [("api:lib",)]


@pytest.mark.postgres
def test_relay_serve_takes_a_postgresql_url_in_db_and_its_environment(
    pg: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcron.relay import server as relay_server

    seen: list[RelayOptions] = []
    monkeypatch.setattr(relay_server, "run", lambda options, echo: seen.append(options))
    assert cli("relay", "serve", "--db", pg.replace("postgresql", "postgres", 1)).exit_code == 0
    assert seen[0].url == sa.make_url(pg).set(drivername="postgresql+psycopg").render_as_string(
        hide_password=False
    )
    monkeypatch.setenv("AGENTCRON_RELAY_DB", pg)  # the relay's own variable, a URL too
    relay = build_relay(RelayOptions(home=tmp_path / "relay"))
    assert relay.cron.store.dialect == "postgresql"
    assert relay.where == f"PostgreSQL {shown(pg)}"


@pytest.mark.postgres
def test_serve_with_a_postgresql_url_runs_on_postgresql(pg: str, cwd: Path, tmp_path: Path) -> None:
    """`agentcron serve --db postgresql://...` as a real process: its start-up line names
    PostgreSQL (no password), /readyz is ready, and what the API writes is in PostgreSQL.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = str(Path(agentcron.__file__).parent.parent)  # the sources under test
    env = {**os.environ, "AGENTCRON_HOME": str(tmp_path / "home"), "PYTHONPATH": src}
    command = [sys.executable, "-c", "from agentcron.cli import main; main()",
               "serve", "--db", pg, "--port", str(port), "--log-level", "warning"]  # fmt: skip
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("token: ") or proc.poll() is not None:
                    break
            printed = "".join(lines)
            assert f"database: PostgreSQL {shown(pg)}; runner: " in printed, printed
            assert PASSWORD not in printed
            base = f"http://127.0.0.1:{port}"
            ready = httpx.get(f"{base}/readyz", timeout=10)
            assert (ready.status_code, ready.json()["status"]) == (200, "ready")
            token = lines[-1].removeprefix("token: ").strip()
            made = httpx.post(f"{base}/api/sessions", json={"key": "api:served"},
                              headers={"Authorization": f"Bearer {token}"}, timeout=10)  # fmt: skip
            assert made.status_code in (200, 201), made.text
            assert ("api:served",) in rows(pg, "select session_key from sessions")
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(15) == 0
    assert list(cwd.iterdir()) == []
