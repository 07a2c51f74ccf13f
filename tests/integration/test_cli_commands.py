"""The CLI's resource commands, through the database and through a running server's API."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
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
    assert paused.stdout.strip() == "“build”: paused; next run -"  # the name, not the id
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


def test_times_name_their_zone_and_confirmations_say_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "cli.db")
    monkeypatch.setenv("TZ", "America/New_York")  # the person's zone; the job's is Berlin
    assert cli("sessions", "add", "api:ops", "--tz", "Europe/Berlin", "--db", db).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
                "--when", "every day at 9", "--db", db)  # fmt: skip
    assert added.exit_code == 0, added.output
    job_id = added.stdout.strip().rsplit("; id ", 1)[1]
    assert added.stdout.startswith("added “build”: every day at 09:00 (Europe/Berlin); next run ")
    assert " 09:00:00 Europe/Berlin; id " in added.stdout  # the job's zone, named
    sessions = cli("sessions", "list", "--db", db).stdout
    assert " America/New_York" in sessions  # updated: the local zone, named
    assert " UTC" not in sessions
    tokyo = cli("--tz", "Asia/Tokyo", "sessions", "list", "--db", db).stdout
    assert " Asia/Tokyo" in tokyo
    ran = cli("jobs", "run", job_id, "--db", db)
    assert ran.stdout.startswith("a run of “build” asked for; see it: agentcron runs show ")
    runs = cli("runs", "list", "--job", job_id, "--db", db).stdout
    assert " America/New_York" in runs
    shown = cli("jobs", "show", job_id, "--db", db).stdout
    assert "at most one fire waits while the last one runs; more are skipped" in shown
    assert '"overlap"' not in shown
    assert "over 0 runs" in shown
    assert "counted" not in shown


def test_the_cli_holds_schedules_to_the_minimum_interval_the_settings_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    add = ("jobs", "add", "--session", "api:ops", "--name", "n", "--message", "m", "--db", db)
    refused = cli(*add, "--when", "every 10 seconds")
    assert refused.exit_code == 1
    assert refused.stderr.strip() == (
        "error: recurring automations may run at most every 5 minutes (engine.min_interval); "
        "this one runs every 10 seconds"
    )
    monkeypatch.setenv("AGENTCRON_MIN_INTERVAL", "10")  # an operator lowers it
    assert cli(*add, "--when", "every 10 seconds").exit_code == 0


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
    latest = await asyncio.to_thread(cli, "runs", "list", "--db", db)  # across jobs
    assert latest.exit_code == 0, latest.output
    assert "│ ping │ api:ops │ succeeded │" in latest.stdout  # the job's name, not its id


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A real server on a socket, in a thread with its own event loop."""
    with serving(ServeOptions(db=tmp_path / "srv.db", home=tmp_path)) as url:
        yield url


@contextlib.contextmanager
def serving(options: ServeOptions) -> Iterator[str]:
    """`options` served on a free port, in a thread with its own event loop."""
    port = options.port = free_port()
    built = build(options)
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
    # no running channel serves an api: session: the CLI promises no delivery
    sent = cli("sessions", "send", odd, "hello", *api)
    assert sent.exit_code == 0, sent.output
    assert sent.stdout.strip() == (
        f"written to {odd}'s transcript (entry 1) only: no running channel delivers to api: sessions"
    )
    assert cli("sessions", "add", "websocket:w", *api).exit_code == 0
    web = cli("sessions", "send", "websocket:w", "hello", *api).stdout.strip()
    assert web == "written to websocket:w (entry 1): a web chat shows it; no channel delivers it"
    added = cli("jobs", "add", "--session", odd, "--name", "n", "--message", "m",
                "--when", "in 1h", *api, "--json")  # fmt: skip
    job = json.loads(added.stdout)
    assert cli("jobs", "rm", job["id"], *api).stdout.strip() == "removed “n”"
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


@pytest.fixture
def tool_server(tmp_path: Path) -> Iterator[str]:
    """A real server of the offline model with `wipe`, a tool that requires approval."""
    from tests.integration import tool_module

    tools = tmp_path / "tools.toml"
    tools.write_text('[tools]\npython = ["tests.integration.tool_module:WEATHER"]\n')
    tool_module.calls.clear()
    options = ServeOptions(db=tmp_path / "srv.db", home=tmp_path, model="offline", tools=tools)
    with serving(options) as url:
        yield url
    tool_module.calls.clear()


def ask(server: str, key: str, text: str) -> None:
    """Say `text` in session `key` through the API (a turn starts)."""
    headers = {"Authorization": f"Bearer {cli('token').stdout.strip()}"}
    with httpx.Client(base_url=server, headers=headers) as http:
        assert http.post("/api/sessions", json={"key": key}).status_code in (200, 201)
        sent = http.post(f"/api/sessions/{key}/messages", json={"content": text})
        assert sent.status_code == 202, sent.text


def pending_of(*args: str) -> list[dict[str, object]]:
    """`approvals list ARGS --json` once it lists one (within 5 s)."""
    for _ in range(500):
        listed = cli("approvals", "list", *args, "--json")
        assert listed.exit_code == 0, listed.output
        found: list[dict[str, object]] = json.loads(listed.stdout)
        if found:
            return found
        threading.Event().wait(0.01)
    raise AssertionError("no approval was requested")


def tool_results(server: str, key: str) -> list[str]:
    """The contents of a session's tool entries, once its turn has ended (within 5 s)."""
    headers = {"Authorization": f"Bearer {cli('token').stdout.strip()}"}
    with httpx.Client(base_url=server, headers=headers) as http:
        for _ in range(500):
            messages = http.get(f"/api/sessions/{key}/messages").json()["messages"]
            if messages[-1]["role"] == "assistant":
                return [m["content"] for m in messages if m["role"] == "tool"]
            threading.Event().wait(0.01)
    raise AssertionError(f"the turn of {key} did not end")


def test_approvals_through_the_api(tool_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration import tool_module

    monkeypatch.setenv("AGENTCRON_URL", tool_server)
    assert json.loads(cli("approvals", "list", "--json").stdout) == []
    assert "0 approval(s)" in cli("approvals", "list").stdout
    ask(tool_server, "api:ops", "use wipe with path=/tmp/x")
    (approval,) = pending_of()
    assert (approval["session_key"], approval["tool"], approval["args"], approval["state"]) == (
        "api:ops",
        "wipe",
        {"path": "/tmp/x"},
        "pending",
    )
    assert pending_of("--session", "api:ops") == [approval]
    assert json.loads(cli("approvals", "list", "--session", "api:other", "--json").stdout) == []
    table = cli("approvals", "list").stdout
    assert approval["id"] in table
    assert "wipe" in table
    assert '{"path": "/tmp/x"}' in table
    # show: the API's JSON, and a detail view
    headers = {"Authorization": f"Bearer {cli('token').stdout.strip()}"}
    from_api = httpx.get(f"{tool_server}/api/approvals/{approval['id']}", headers=headers)
    assert json.loads(cli("approvals", "show", str(approval["id"]), "--json").stdout) == (
        from_api.json()
    )
    shown = cli("approvals", "show", str(approval["id"])).stdout
    assert f"approval {approval['id']}" in shown
    assert "pending" in shown
    # errors: an unknown id, a bad `by` (nothing was decided)
    missing = cli("approvals", "show", "01NOPE")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: no approval 01NOPE (HTTP 404)"
    unknown = cli("approvals", "approve", "01NOPE")
    assert unknown.exit_code == 1
    assert unknown.stderr.strip() == "error: no approval 01NOPE (HTTP 404)"
    bad = cli("approvals", "deny", str(approval["id"]), "--by", "")
    assert bad.exit_code == 1
    assert "(HTTP 422)" in bad.stderr
    assert tool_module.calls == []
    # approve, by the CLI's user by default: the tool runs and the turn goes on
    approved = cli("approvals", "approve", str(approval["id"]))
    assert approved.exit_code == 0, approved.output
    by = f"cli:{getpass.getuser()}"
    assert approved.stdout.strip() == f"approved: the wipe call in api:ops, by {by}"
    assert tool_results(tool_server, "api:ops") == ["wiped /tmp/x"]
    assert tool_module.calls == [{"wipe": "/tmp/x"}]
    again = cli("approvals", "deny", str(approval["id"]))
    assert again.exit_code == 1
    assert again.stderr.strip() == (
        f"error: approval {approval['id']} is already approved (HTTP 409)"
    )
    assert json.loads(cli("approvals", "list", "--json").stdout) == []
    (decided,) = json.loads(cli("approvals", "list", "--all", "--json").stdout)
    assert (decided["state"], decided["decided_by"]) == ("approved", by)


def test_approvals_through_the_database_of_a_running_server(
    tool_server: str, tmp_path: Path
) -> None:
    from tests.integration import tool_module

    db = ("--db", str(tmp_path / "srv.db"))
    ask(tool_server, "api:ops", "use wipe with path=/a")
    (approval,) = pending_of(*db)
    assert (approval["tool"], approval["args"]) == ("wipe", {"path": "/a"})
    shown = json.loads(cli("approvals", "show", str(approval["id"]), *db, "--json").stdout)
    assert shown == approval
    missing = cli("approvals", "deny", "01NOPE", *db)
    assert (missing.exit_code, missing.stderr.strip()) == (1, "error: no approval 01NOPE")
    bad = cli("approvals", "deny", str(approval["id"]), *db, "--by", "")
    assert bad.exit_code == 1
    assert bad.stderr.startswith("error: by: String should have at least 1 character")
    # decided on the record: the turn waiting in the server reads it and goes on
    denied = cli("approvals", "deny", str(approval["id"]), *db, "--by", "ana", "--json")
    assert denied.exit_code == 0, denied.output
    assert (json.loads(denied.stdout)["state"], json.loads(denied.stdout)["decided_by"]) == (
        "denied",
        "ana",
    )
    (result,) = tool_results(tool_server, "api:ops")
    assert "Denied by ana" in result
    assert tool_module.calls == []
    again = cli("approvals", "approve", str(approval["id"]), *db)
    assert again.exit_code == 1
    assert again.stderr.strip() == f"error: approval {approval['id']} is already denied"
    (listed,) = json.loads(cli("approvals", "list", "--all", *db, "--json").stdout)
    assert listed["state"] == "denied"
    assert "ana" in cli("approvals", "list", "--all", *db).stdout


def test_token_runner_prints_the_runner_secret_created_once(home: Path) -> None:
    first = cli("token", "--runner").stdout.strip()
    assert first.startswith("whsec_")
    assert cli("token", "--runner").stdout.strip() == first
    assert (home / "runner_secret").read_text().strip() == first
    assert cli("token").stdout.strip() != first  # the API token is another


def test_standing_grants_through_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "logs", "--message", "archive",
                "--when", "every day at 9", "--db", db, "--json")  # fmt: skip
    job = json.loads(added.stdout)["id"]
    assert cli("jobs", "grant", "list", job, "--db", db).stdout.strip() == "no grants"
    made = cli("jobs", "grant", "add", job, "archive_logs", "--arg", "name=*.log",
               "--args", '{"dry": false}', "--for", "7d", "--by", "ana", "--db", db, "--json")  # fmt: skip
    assert made.exit_code == 0, made.output
    grant = json.loads(made.stdout)
    assert (grant["tool"], grant["args"], grant["granted_by"]) == (
        "archive_logs",
        {"dry": False, "name": "*.log"},
        "ana",
    )
    listed = cli("jobs", "grant", "list", job, "--db", db).stdout
    assert f'{grant["id"]}  archive_logs {{"dry": false, "name": "*.log"}}  until ' in listed
    assert listed.rstrip().endswith("by ana")
    default_by = json.loads(
        cli("jobs", "grant", "add", job, "other", "--for", "1h", "--db", db, "--json").stdout
    )["granted_by"]
    assert default_by == f"cli:{getpass.getuser()}"
    # refused: a glob for the tool, no expiry, both expiries, an unknown job
    glob = cli("jobs", "grant", "add", job, "archive_*", "--for", "1h", "--db", db)
    assert (glob.exit_code, "not a glob" in glob.stderr) == (1, True)
    assert cli("jobs", "grant", "add", job, "x", "--db", db).exit_code == 2
    both = cli("jobs", "grant", "add", job, "x", "--for", "1h", "--until", "2030-01-01T00:00Z",
               "--db", db)  # fmt: skip
    assert both.exit_code == 2
    assert cli("jobs", "grant", "list", "nope", "--db", db).exit_code == 1
    revoked = cli("jobs", "grant", "revoke", job, grant["id"], "--db", db)
    assert revoked.stdout.strip() == f"revoked {grant['id']}"
    again = cli("jobs", "grant", "revoke", job, grant["id"], "--db", db)
    assert again.exit_code == 1
    left = json.loads(cli("jobs", "grant", "list", job, "--db", db, "--json").stdout)
    assert [g["tool"] for g in left] == ["other"]
