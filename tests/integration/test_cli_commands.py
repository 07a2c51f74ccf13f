"""The CLI's resource commands, through the database and through a running server's API."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner, Result

from agentcron.cli import app
from agentcron.server.serve import ServeOptions, build
from agentcron.testing import wait_settled
from tests.conftest import CronFactory, FakeClock

runner = CliRunner()


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args), catch_exceptions=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTCRON_HOME", str(tmp_path))
    for name in ("AGENTCRON_TOKEN", "AGENTCRON_URL", "AGENTCRON_DB"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_jobs_and_sessions_through_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--tz", "Europe/Berlin", "--db", db).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
                "--when", "every weekday at 9", "--db", db, "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout)
    assert job["schedule"] == "every weekday at 09:00 (Europe/Berlin)"
    listed = cli("jobs", "list", "--db", db)
    assert f"│ {job['id']} │ build " in listed.stdout  # a table 160 wide off a terminal: ids whole
    assert "every weekday at 09:00 (Europe/Berlin)" in listed.stdout
    shown = cli("jobs", "show", job["id"], "--db", db)
    assert shown.exit_code == 0
    assert "next fires:" in shown.stdout
    paused = cli("jobs", "pause", job["id"], "--db", db)
    assert f"{job['id']} “build”: paused; next run -" in paused.stdout
    resumed = cli("jobs", "resume", job["id"], "--db", db, "--json")
    assert json.loads(resumed.stdout)["enabled"] is True
    # two-step session delete
    blocked = cli("sessions", "rm", "api:ops", "--db", db)
    assert blocked.exit_code == 1
    assert f"api:ops owns automations: “build” ({job['id']}); nothing was deleted" in blocked.stderr
    assert "--confirm" in blocked.stderr
    assert cli("sessions", "list", "--db", db).stdout.count("api:ops") == 1
    done = cli("sessions", "rm", "api:ops", "--confirm", "--db", db)
    assert done.stdout.strip() == "deleted api:ops and 1 automation(s)"
    assert json.loads(cli("jobs", "list", "--db", db, "--json").stdout) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (
                "jobs",
                "add",
                "--session",
                "api:ops",
                "--name",
                "n",
                "--message",
                "m",
                "--when",
                "whenever",
            ),
            "cannot read 'whenever' as a time; accepted forms",
        ),
        (
            (
                "jobs",
                "add",
                "--session",
                "api:nope",
                "--name",
                "n",
                "--message",
                "m",
                "--when",
                "in 1h",
            ),
            "no session 'api:nope': create it first",
        ),
        (("jobs", "show", "01NOPE"), "no job with id '01NOPE'"),
        (("jobs", "rm", "01NOPE"), "no job with id '01NOPE'"),
        (("runs", "show", "01NOPE"), "no run with id '01NOPE'"),
        (("sessions", "show", "api:nope"), "no session with key 'api:nope'"),
        (
            ("jobs", "add", "--session", "api:ops", "--name", "", "--message", "m", "--when", "1h"),
            "name: String should have at least 1 character",
        ),
    ],
)
def test_errors_are_one_clear_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    db = str(tmp_path / "cli.db")
    cli("sessions", "add", "api:ops", "--db", db)
    result = cli(*args, "--db", db)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback


ADD = "jobs add --session s:1 --name n --message m --when 1h"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("jobs list --kind weird", "Invalid value for '--kind'"),
        (f"{ADD} --overlap later", "Invalid value for '--overlap'"),
        (f"{ADD} --max-runs 0", "Invalid value for '--max-runs'"),
        ("runs list --job x --limit 0", "Invalid value for '--limit'"),
        ("jobs list --db a.db --url sqlite:///b.db", "give --db or --url, not both"),
        ("jobs pause", "Missing argument 'ID'"),
    ],
)
def test_usage_errors_exit_2(args: str, message: str) -> None:
    result = cli(*args.split())
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.replace("│", " ").split())
    assert "Traceback" not in result.stderr


def test_a_missing_or_broken_database_file_is_one_line(tmp_path: Path) -> None:
    missing = cli("jobs", "list", "--db", str(tmp_path / "typo.db"))
    assert missing.exit_code == 1
    assert missing.stderr.startswith(f"error: no database at {tmp_path / 'typo.db'}")
    assert not (tmp_path / "typo.db").exists()  # reading never creates one
    (tmp_path / "junk.db").write_text("not a database\n" * 100)
    for args in (("jobs", "list", "--db"), ("db", "upgrade", "--db")):
        broken = cli(*args, str(tmp_path / "junk.db"))
        assert broken.exit_code == 1
        assert broken.stderr.startswith(f"error: cannot open the database {tmp_path / 'junk.db'}")
        assert "file is not a database" in broken.stderr
        assert broken.stderr.count("\n") == 1, broken.stderr


async def test_runs_of_a_fire_through_the_database(
    tmp_path: Path, make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron()  # the recorder runner, on tests/conftest's db_path
    await cron.sessions.create("api:ops")
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key="api:ops")
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    await cron.close()
    db = str(tmp_path / "agentcron.db")
    # each command runs its own event loop: keep them off this test's loop
    listed = await asyncio.to_thread(cli, "runs", "list", "--job", job.id, "--db", db, "--json")
    (run,) = json.loads(listed.stdout)
    assert run["state"] == "succeeded"
    shown = await asyncio.to_thread(cli, "runs", "show", run["id"], "--db", db)
    assert "succeeded" in shown.stdout
    assert "done: ping" in shown.stdout
    assert "rendered prompt" in shown.stdout
    assert "Task:\nping\n" in shown.stdout  # the prompt verbatim
    full = json.loads(
        (await asyncio.to_thread(cli, "runs", "show", run["id"], "--db", db, "--json")).stdout
    )
    assert full["prompt"].endswith("Task:\nping\n")
    assert full["prompt_ref"]["id"] == "cron.agent_turn.reminder"
    detail = await asyncio.to_thread(cli, "jobs", "show", job.id, "--db", db)
    assert "│ state       │ done " in detail.stdout  # a one-shot after its fire
    assert run["id"] in detail.stdout  # its last runs
    both = await asyncio.to_thread(cli, "runs", "list", "--db", db)
    assert both.exit_code == 2
    assert "give exactly one of --job ID or --session KEY" in both.stderr


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A real server on a socket, in a thread with its own event loop."""
    port = free_port()
    built = build(ServeOptions(db=tmp_path / "srv.db", home=tmp_path, port=port))
    srv = uvicorn.Server(uvicorn.Config(built.app, host="127.0.0.1", port=port,
                                        log_level="warning", lifespan="on"))  # fmt: skip
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(500):
        if srv.started:
            break
        threading.Event().wait(0.01)
    assert srv.started, "the test server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)


def test_jobs_through_the_api(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    token = cli("token").stdout.strip()
    assert len(token) >= 40  # the server's token, from the data dir
    api = ("--api", server)
    assert cli("sessions", "add", "websocket:x", "--tz", "Europe/Berlin", *api).exit_code == 0
    added = cli("jobs", "add", "--session", "websocket:x", "--name", "news", "--message", "m",
                "--when", "every day at 8", "--overlap", "skip", *api, "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    job = json.loads(added.stdout)
    assert job["schedule"] == "every day at 08:00 (Europe/Berlin)"  # the session's zone
    assert job["policy"]["overlap"] == "skip"
    assert "news" in cli("jobs", "list", "--session", "websocket:x", *api).stdout
    monkeypatch.setenv("AGENTCRON_URL", server)  # the default for --api
    listed = json.loads(cli("jobs", "list", "--enabled", "--json").stdout)
    assert [j["id"] for j in listed] == [job["id"]]
    shown = cli("jobs", "show", job["id"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.count("08:00:00 Europe/Berlin") >= 5  # next run + the next 5 fires
    detail = json.loads(cli("jobs", "show", job["id"], "--json").stdout)
    assert len(detail["upcoming"]) == 5
    assert detail["runs"] == []
    assert "usage" in detail
    assert "paused" in cli("jobs", "pause", job["id"]).stdout
    assert json.loads(cli("jobs", "list", "--disabled", "--json").stdout)[0]["id"] == job["id"]
    assert json.loads(cli("jobs", "resume", job["id"], "--json").stdout)["enabled"] is True
    assert json.loads(cli("runs", "list", "--job", job["id"], "--json").stdout) == []
    session = cli("sessions", "show", "websocket:x")
    assert "Europe/Berlin" in session.stdout
    assert "news" in session.stdout
    # two-step delete through the API
    blocked = cli("sessions", "rm", "websocket:x")
    assert blocked.exit_code == 1
    assert f"websocket:x owns automations: “news” ({job['id']})" in blocked.stderr
    assert "--confirm" in blocked.stderr
    assert cli("jobs", "show", job["id"]).exit_code == 0  # nothing was deleted
    done = cli("sessions", "rm", "websocket:x", "--confirm")
    assert done.stdout.strip() == "deleted websocket:x and 1 automation(s)"
    gone = cli("jobs", "rm", job["id"])
    assert gone.exit_code == 1
    assert gone.stderr.strip() == f"error: no job with id '{job['id']}' (HTTP 404)"


def test_api_errors_and_odd_keys(server: str) -> None:
    api = ("--api", server)
    odd = "api:a b?c#d%"  # a key is free text after the channel: sent percent-encoded
    assert cli("sessions", "add", odd, *api).exit_code == 0
    assert json.loads(cli("sessions", "show", odd, *api, "--json").stdout)["key"] == odd
    added = cli("jobs", "add", "--session", odd, "--name", "n", "--message", "m",
                "--when", "in 1h", *api, "--json")  # fmt: skip
    job = json.loads(added.stdout)
    assert cli("jobs", "rm", job["id"], *api).stdout.strip() == f"removed {job['id']}"
    assert cli("sessions", "rm", odd, *api).stdout.strip() == f"deleted {odd}"
    bad = cli("jobs", "add", "--session", "api:none", "--name", "n", "--message", "m",
              "--when", "whenever", *api)  # fmt: skip
    assert bad.exit_code == 1
    assert "no session 'api:none'" in bad.stderr
    assert cli("sessions", "add", "api:ops", *api).exit_code == 0
    bad = cli("jobs", "add", "--session", "api:ops", "--name", "n", "--message", "m",
              "--when", "whenever", *api)  # fmt: skip
    assert bad.exit_code == 1
    assert "cannot read 'whenever' as a time" in bad.stderr
    assert "(HTTP 422)" in bad.stderr
    assert bad.stderr.count("\n") == 1
    missing = cli("runs", "show", "01NOPE", *api)
    assert missing.stderr.strip() == "error: no run with id '01NOPE' (HTTP 404)"
    wrong = cli("sessions", "list", *api, "--token", "nope")
    assert wrong.exit_code == 1
    assert "wrong token" in wrong.stderr


def test_an_unreachable_api_says_what_to_do() -> None:
    result = cli("jobs", "list", "--api", f"http://127.0.0.1:{free_port()}")
    assert result.exit_code == 1
    assert "cannot reach the agentcron API" in result.stderr
    assert "agentcron serve" in result.stderr
    assert "--db" in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_the_readme_run_command_serves_the_ui_and_the_demo(tmp_path: Path) -> None:
    """`agentcron serve --demo` as a real process: start-up lines, UI, API, demo chat, Ctrl-C."""
    port = free_port()
    env = {**os.environ, "AGENTCRON_HOME": str(tmp_path), "AGENTCRON_OFFLINE_WPS": "0"}
    script = Path(sys.executable).with_name("agentcron")
    with subprocess.Popen(
        [str(script), "serve", "--demo", "--port", str(port), "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("token: "):
                    break
            printed = "".join(lines)
            assert f"agentcron serving at http://127.0.0.1:{port}/" in printed, printed
            token = lines[-1].removeprefix("token: ").strip()
            base = f"http://127.0.0.1:{port}"
            assert "<html" in httpx.get(base + "/").text.lower()
            headers = {"Authorization": f"Bearer {token}"}
            (session,) = httpx.get(base + "/api/sessions", headers=headers).json()["sessions"]
            assert session["title"] == "Demo: a reminder from a sentence"
            key = session["key"]
            (turn,) = httpx.get(f"{base}/api/sessions/{key}/turns", headers=headers).json()["turns"]
            done = httpx.get(f"{base}/api/turns/{turn['id']}?wait=10", headers=headers).json()
            assert done["state"] == "succeeded"
            assert done["reply"].startswith("(offline model) Done: Scheduled “stretch”")
            jobs = httpx.get(f"{base}/api/jobs?session_key={key}", headers=headers).json()["jobs"]
            assert [j["name"] for j in jobs] == ["stretch"]
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(15) == 0
