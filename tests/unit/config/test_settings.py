"""`Settings`: the environment over the file over the defaults, flags over all, each part read
when asked for, the file never written into the environment.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from agentcron.config import ConfigError, Settings
from agentcron.config.channels import ChannelConfigError

FILE = """
[server]
home = "/srv/cron"
port = 9001
unified = true
shared_chat = true
token = "file-token-0123456789"

[engine]
max_jobs = 7
takeover = 30

[agent]
model = "openai:gpt-4o"
base_url = "http://127.0.0.1:11434/v1"
offline_wps = 0
tools_file = "/etc/agentcron/tools.toml"

[wake]
provider = "managed"
relay_url = "https://relay.example"

[webhook]
url = "https://hooks.example/in"
secret = "s3cret"
channels = ["telegram"]

[relay]
port = 9400
delivery_deadline = 60
"""


def write(tmp_path: Path, text: str = FILE) -> Path:
    path = tmp_path / "agentcron.toml"
    path.write_text(text, "utf-8")
    return path


def test_each_part_carries_the_files_values_and_the_environment_wins(tmp_path: Path) -> None:
    env = {"AGENTCRON_PORT": "9002", "AGENTCRON_MAX_JOBS": "", "PATH": "/bin"}
    settings = Settings.load(write(tmp_path), env)
    assert env == {"AGENTCRON_PORT": "9002", "AGENTCRON_MAX_JOBS": "", "PATH": "/bin"}
    assert settings.server().port == 9002  # the environment
    assert settings.engine().max_jobs == 7  # set but empty: the file's
    assert settings.engine().takeover == timedelta(seconds=30)
    assert settings.data().dir == Path("/srv/cron")
    assert settings.data().token == "file-token-0123456789"
    assert settings.sessions().unified is True
    assert settings.sessions().shared_chat is True
    assert settings.agent().model == "openai:gpt-4o"
    provider = settings.provider()
    assert (provider.base_url, provider.offline_wps) == ("http://127.0.0.1:11434/v1", "0")
    assert settings.wake().provider == "managed"
    assert settings.wake().jwks == "https://relay.example/jwks.json"
    hook = settings.channels().webhook
    assert hook is not None
    assert (hook.url, hook.channels) == ("https://hooks.example/in", ["telegram"])
    relay = settings.relay()
    assert (relay.port, relay.deadline, relay.issuer) == (9400, 60.0, "http://127.0.0.1:9400")
    assert relay.home == Path("/srv/cron/relay")  # in the file's data directory
    assert settings.database().url == "sqlite:////srv/cron/agentcron.db"
    assert settings.values["PATH"] == "/bin"  # the whole environment: ${NAME} may name any


def test_nothing_set_gives_the_defaults(tmp_path: Path) -> None:
    settings = Settings.load(None, {"AGENTCRON_HOME": str(tmp_path)})
    assert settings.server().port == 8321
    assert settings.engine().max_jobs == 500
    assert settings.sessions().unified is False
    assert settings.sessions().shared_chat is False  # replies in the last active thread
    assert settings.channels().webhook is None
    assert settings.wake().provider == "local"
    assert settings.cli().url == "http://127.0.0.1:8321"
    assert settings.database().url == f"sqlite:///{tmp_path}/agentcron.db"
    assert settings.database().env is None
    assert settings.tools_file() is None
    assert settings.tools().empty


def test_a_flag_wins_and_spares_the_value_it_replaces(tmp_path: Path) -> None:
    settings = Settings.load(None, {"AGENTCRON_PORT": "eighty", "AGENTCRON_WAKE": "bogus"})
    with pytest.raises(ConfigError, match="AGENTCRON_PORT must be a whole number, got 'eighty'"):
        settings.server()
    assert settings.server(port=8080, host="0.0.0.0").port == 8080
    with pytest.raises(ConfigError, match="local or managed, got 'bogus'"):
        settings.wake()
    assert settings.wake(provider="local").provider == "local"
    assert settings.sessions(unified=True).unified is True
    shared = Settings.load(None, {"AGENTCRON_UNIFIED_SHARED_CHAT": "1"}).sessions()
    assert shared.shared_chat is True
    assert Settings.load(None, {}).sessions(shared_chat=True).shared_chat is True
    assert settings.cli(url="http://h:1").url == "http://h:1"


def test_a_bad_value_stops_only_the_part_that_holds_it(tmp_path: Path) -> None:
    env = {"AGENTCRON_TAKEOVER": "soon", "AGENTCRON_TELEGRAM_TOKEN": "not a token"}
    settings = Settings.load(None, env)
    with pytest.raises(ConfigError, match="AGENTCRON_TAKEOVER must be a number of seconds"):
        settings.engine()
    with pytest.raises(ChannelConfigError, match="must be a bot token"):
        settings.channels()
    assert settings.server().port == 8321  # the other parts read on
    rows = {row.setting.key: row for row in settings.effective()}  # `config show` still works
    assert (rows["engine.takeover"].value, rows["engine.takeover"].source) == ("soon", "env")
    assert rows["telegram.token"].value == "(set)"  # a secret, masked


def test_a_bad_file_is_refused_when_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent.temperature must be a number, got 'hot'"):
        Settings.load(write(tmp_path, "[agent]\ntemperature = 'hot'\n"), {})


def test_the_tools_file_is_the_flag_then_the_setting_then_the_configuration_file(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "[tools]\npython = ['tests.integration.tool_module:lookup']\n")
    plain = Settings.load(path, {"CALC": "7"})
    assert plain.tools_file() == path
    assert plain.tools_file(tmp_path / "flag.toml") == tmp_path / "flag.toml"
    named = Settings.load(path, {"AGENTCRON_TOOLS_FILE": str(tmp_path / "own.toml")})
    assert named.tools_file() == tmp_path / "own.toml"
    config = plain.tools()
    assert config.source == path
    assert config.table.python == ["tests.integration.tool_module:lookup"]
    assert config.environ is not None
    assert config.environ["CALC"] == "7"  # what the servers' ${NAME} is expanded from


def test_the_database_part_and_where_it_came_from(tmp_path: Path) -> None:
    path = write(tmp_path, '[server]\ndb = "postgres://u@db/file"\n')
    env = {"AGENTCRON_DATABASE_URL": "postgresql://u@db/env"}
    settings = Settings.load(path, env)
    target = settings.database()
    assert (target.url, target.env) == ("postgresql+psycopg://u@db/env", "AGENTCRON_DATABASE_URL")
    assert settings.source(target.env) == "env"
    demo = settings.database(url_env=False)  # the demo and the library read [server] db only
    assert (demo.url, demo.env) == ("postgresql+psycopg://u@db/file", "AGENTCRON_DB")
    assert settings.source(demo.env) == "file"
    assert settings.source(None) == "default"


def test_the_runner_part_checks_its_values(tmp_path: Path) -> None:
    from agentcron.config import RunnerSettings

    assert Settings().runner() == RunnerSettings()
    env = {"AGENTCRON_RUNNER_URL": "http://a/turn", "AGENTCRON_RUNNER_RETRIES": "0"}
    found = Settings(values=env).runner(url="https://b/turn")
    assert (found.url, found.retries, found.concurrency) == ("https://b/turn", 0, 16)
    for name, value, problem in (
        ("AGENTCRON_RUNNER_URL", "ftp://a", "http"),
        ("AGENTCRON_RUNNER_SECRET", "plain", "whsec_"),
        ("AGENTCRON_RUNNER_TIMEOUT", "0", "timeout"),
        ("AGENTCRON_RUNNER_CONCURRENCY", "0", "concurrency"),
        ("AGENTCRON_RUNNER_RETRIES", "many", "whole number"),
    ):
        with pytest.raises(ConfigError, match=problem):
            Settings(values={name: value}).runner()


@pytest.mark.parametrize(
    ("tz", "link", "zone"),
    [
        ("America/New_York", "Europe/Berlin", "America/New_York"),  # $TZ wins
        (":Asia/Tokyo", "Europe/Berlin", "Asia/Tokyo"),  # the glibc form
        ("/usr/share/zoneinfo/Europe/Paris", None, "Europe/Paris"),
        ("", "Europe/Berlin", "Europe/Berlin"),  # unset: the machine's zone
        ("nowhere", "Etc/UTC", "UTC"),  # a $TZ no zone has: the machine's (UTC, named)
        ("", None, "UTC"),  # nothing to go by
    ],
)
def test_the_local_zone_is_tz_else_the_machines(
    tmp_path: Path, tz: str, link: str | None, zone: str
) -> None:
    from agentcron.config.server import local_zone

    localtime = tmp_path / "localtime"
    if link is not None:
        localtime.symlink_to(f"/usr/share/zoneinfo/{link}")
    assert local_zone({"TZ": tz}, localtime=localtime) == zone


def test_the_cli_zone_comes_from_tz_or_the_file(tmp_path: Path) -> None:
    file = tmp_path / "agentcron.toml"
    file.write_text('[cli]\ntz = "Europe/Vienna"\n')
    assert Settings.load(file, {}).cli().tz == "Europe/Vienna"
    assert Settings.load(file, {"TZ": "Asia/Tokyo"}).cli().tz == "Asia/Tokyo"
