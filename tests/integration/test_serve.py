"""`agentcron serve` wiring: tokens in the data dir, the app's lifespan, the --demo session."""

from __future__ import annotations

import stat
from datetime import timedelta
from pathlib import Path

import pytest

from agentcron.approval_links import ApprovalLinks
from agentcron.config import ConfigError
from agentcron.domain.jobs import JobKind
from agentcron.domain.states import RunState
from agentcron.server.serve import DEMO_KEY, DEMO_SENTENCE, ServeOptions, build
from agentcron.testing import FakeClock, wait_settled


@pytest.fixture(autouse=True)
def _no_env_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTCRON_TOKEN", "AGENTCRON_HOOK_TOKEN", "AGENTCRON_WEBHOOK_URL",
                 "AGENTCRON_TELEGRAM_TOKEN", "AGENTCRON_PUBLIC_URL"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def test_tokens_are_created_once_owner_only_and_reused(tmp_path: Path) -> None:
    first = build(ServeOptions(db=tmp_path / "a.db", home=tmp_path))
    again = build(ServeOptions(db=tmp_path / "a.db", home=tmp_path))
    assert first.token == again.token
    assert first.hook_token == again.hook_token
    assert first.token != first.hook_token
    assert len(first.token) >= 40
    mode = stat.S_IMODE((tmp_path / "token").stat().st_mode)
    assert mode == 0o600


def test_decision_urls_use_the_public_url_and_are_keyed_by_the_api_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCRON_PUBLIC_URL", "https://cron.example.org/")
    server = build(ServeOptions(db=tmp_path / "a.db", home=tmp_path))
    links = server.app.state.approval_links
    assert links is server.app.state.channels.approval_links  # made and checked alike
    url = links.decision_url("a1")
    assert url == f"https://cron.example.org/api/approvals/a1/decide?token={links.token('a1')}"
    assert links.verify("a1", ApprovalLinks(server.token).token("a1"))
    assert not links.verify("a1", ApprovalLinks(server.hook_token).token("a1"))
    monkeypatch.setenv("AGENTCRON_PUBLIC_URL", "cron.example.org")
    with pytest.raises(ConfigError, match="AGENTCRON_PUBLIC_URL must be"):
        build(ServeOptions(db=tmp_path / "a.db", home=tmp_path))


def test_the_files_values_reach_the_server_through_the_settings_not_the_environment(
    tmp_path: Path,
) -> None:
    import math
    import os

    from agentcron.agent.builtin import BuiltinRunner
    from agentcron.agent.offline import OfflineModel
    from agentcron.channels import TelegramChannel, WebhookChannel
    from agentcron.config import Settings

    path = tmp_path / "agentcron.toml"
    path.write_text(
        f'[server]\nhome = "{tmp_path / "home"}"\ntoken = "file-token-0123456789"\n'
        'unified = true\npublic_url = "https://cron.example.org/"\n'
        "[engine]\nmax_jobs = 7\n"
        '[agent]\nsystem_prompt = "Be brief."\noffline_wps = 0\n'
        '[webhook]\nurl = "https://hooks.example/in"\nsecret = "s3cret"\n'
        '[telegram]\ntoken = "123456:AAE-token_x"\nallowed_chats = [42]\n',
        "utf-8",
    )
    before = dict(os.environ)
    settings = Settings.load(path, {})  # nothing in the environment: all from the file
    server = build(ServeOptions(db=tmp_path / "a.db", settings=settings))
    assert dict(os.environ) == before  # nothing written into the environment
    assert server.token == "file-token-0123456789"
    assert (tmp_path / "home" / "hook_token").exists()  # the file's data directory
    cron = server.cron
    assert cron.unified_session is True
    assert cron.settings.max_jobs == 7
    runner = cron.runner
    assert isinstance(runner, BuiltinRunner)
    assert (runner.system_prompt, runner.model_id) == ("Be brief.", "offline")
    assert isinstance(runner.model, OfflineModel)
    assert runner.model.words_per_second == math.inf  # `[agent] offline_wps = 0`
    assert server.app.state.approval_links.public_url == "https://cron.example.org"
    channels = server.app.state.channels.channels
    assert [type(c) for c in channels] == [WebhookChannel, TelegramChannel]


async def test_the_demo_session_gets_its_reminder_as_a_turn(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCRON_OFFLINE_WPS", "0")
    monkeypatch.setenv("TZ", "America/New_York")  # the person at the machine reads its zone
    server = build(ServeOptions(db=tmp_path / "d.db", home=tmp_path, demo=True), clock=clock)
    cron = server.cron
    async with server.app.router.lifespan_context(server.app):
        assert cron.running
        (session,) = await cron.sessions.list()
        assert (session.key, session.tz) == (DEMO_KEY, "America/New_York")
        await wait_settled(cron.engine)
        (job,) = await cron.jobs.list()
        assert (job.kind, job.session_key) == (JobKind.AGENT_TURN, session.key)
        clock.advance(timedelta(seconds=30))
        await wait_settled(cron.engine)
        (run,) = await cron.runs.list(job.id)
        assert run.state is RunState.SUCCEEDED
        contents = [m.content for m in await cron.sessions.messages(session.key)]
        assert contents[0] == DEMO_SENTENCE
        assert contents[-1] == "(offline model) Reminder: stretch."
    assert not cron.running
    # a second `serve --demo` on the same database finds the demo chat: nothing is added
    again = build(ServeOptions(db=tmp_path / "d.db", home=tmp_path, demo=True), clock=clock)
    async with again.app.router.lifespan_context(again.app):
        await wait_settled(again.cron.engine)
        assert [s.key for s in await again.cron.sessions.list()] == [DEMO_KEY]
        assert [m.content for m in await again.cron.sessions.messages(DEMO_KEY)] == contents
        assert len(await again.cron.jobs.list()) == 0  # the reminder, done and removed


def test_a_busy_port_is_one_error_before_any_url_token_or_file(tmp_path: Path) -> None:
    import socket

    from typer.testing import CliRunner

    from agentcron.cli import app

    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"AGENTCRON_HOME": str(home), "AGENTCRON_TOKEN": "", "AGENTCRON_DB": ""}
        result = CliRunner().invoke(app, ["serve", "--port", str(port), "--demo"], env=env)
    assert result.exit_code == 1
    assert result.stdout == ""  # no URL, no token
    assert result.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use: another server "
        "(agentcron serve?) listens there; stop it or pick another --port"
    )
    assert not home.exists()  # no token, no database, no demo chat
    taken_nowhere = ["serve", "--host", "192.0.2.1", "--port", "8321"]  # TEST-NET: not ours
    elsewhere = CliRunner().invoke(app, taken_nowhere, env=env)
    assert elsewhere.exit_code == 1
    assert elsewhere.stderr.strip() == (
        "error: cannot listen on 192.0.2.1:8321: Cannot assign requested address"
    )
    assert not home.exists()


async def test_the_data_dir_and_the_database_files_are_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = build(ServeOptions(db=home / "db" / "agentcron.db", home=home))
    async with server.app.router.lifespan_context(server.app):
        await server.cron.sessions.create("api:x")  # the WAL gets written
        files = sorted(p.name for p in (home / "db").iterdir())
        assert "agentcron.db-wal" in files
        for name in files:
            assert stat.S_IMODE((home / "db" / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "db").stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "token").stat().st_mode) == 0o600


def test_an_existing_world_readable_database_is_tightened(tmp_path: Path) -> None:
    from agentcron.store.database import owner_only_file

    db = tmp_path / "old.db"
    for path in (db, tmp_path / "old.db-wal"):
        path.write_bytes(b"")
        path.chmod(0o644)
    owner_only_file(db)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "old.db-wal").stat().st_mode) == 0o600


def test_a_runner_url_runs_the_turns_on_your_agent_with_a_secret_kept_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentcron.agent.http_runner import HttpRunner
    from agentcron.config import Settings

    monkeypatch.delenv("AGENTCRON_RUNNER_SECRET", raising=False)
    config = tmp_path / "agentcron.toml"
    config.write_text('[runner]\nurl = "http://127.0.0.1:8400/turn"\ntimeout = 20\n')
    options = ServeOptions(db=tmp_path / "a.db", home=tmp_path, settings=Settings.load(config))
    first = build(options)
    runner = first.cron.runner
    assert isinstance(runner, HttpRunner)
    assert first.cron.http_runner is not None
    assert runner is first.cron.http_runner.main
    assert (runner.url, runner.timeout) == ("http://127.0.0.1:8400/turn", 20)
    assert runner.secret.startswith("whsec_")
    assert stat.S_IMODE((tmp_path / "runner_secret").stat().st_mode) == 0o600
    flag = ServeOptions(db=tmp_path / "a.db", home=tmp_path, runner_url="http://other/turn")
    again = build(flag)
    assert isinstance(again.cron.runner, HttpRunner)
    assert again.cron.runner.url == "http://other/turn"  # the flag wins
    assert again.cron.runner.secret == runner.secret  # created once
