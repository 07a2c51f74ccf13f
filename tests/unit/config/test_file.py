"""The configuration file: every setting in one TOML file; flag > environment > file > default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentcron.cli import app
from agentcron.config import ConfigError, Settings, settings_from_env
from agentcron.config.file import SETTINGS, dump_example, mask, read_config

# Every setting's variable unset for the CLI runs (and restored after them).
CLEAN: dict[str, str | None] = {s.env: None for s in SETTINGS} | {"AGENTCRON_CONFIG": None}

GOOD = """
[server]
unified = true

[engine]
max_jobs = "none"
history_budget = 8000

[agent]
model = "openai:gpt-4o"
temperature = 0.3
max_steps = 12
api_key = "sk-abcdefghijklmnop1234"

[webhook]
channels = ["webhook", "ops"]

[telegram]
allowed_chats = [42, -100123]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentcron.toml"
    path.write_text(text, "utf-8")
    return path


def test_a_file_sets_each_setting_as_its_environment_variable(tmp_path: Path) -> None:
    assert read_config(write(tmp_path, GOOD)) == {
        "AGENTCRON_UNIFIED_SESSION": "true",
        "AGENTCRON_MAX_JOBS": "none",
        "AGENTCRON_HISTORY_BUDGET": "8000",
        "AGENTCRON_MODEL": "openai:gpt-4o",
        "AGENTCRON_TEMPERATURE": "0.3",
        "AGENTCRON_MAX_STEPS": "12",
        "AGENTCRON_API_KEY": "sk-abcdefghijklmnop1234",
        "AGENTCRON_WEBHOOK_CHANNELS": "webhook,ops",
        "AGENTCRON_TELEGRAM_ALLOWED_CHATS": "42,-100123",
    }


def test_the_environment_wins_over_the_file_which_is_not_written_into_it(tmp_path: Path) -> None:
    env = {"AGENTCRON_MODEL": "offline", "AGENTCRON_TEMPERATURE": ""}
    settings = Settings.load(write(tmp_path, GOOD), env)
    assert env == {"AGENTCRON_MODEL": "offline", "AGENTCRON_TEMPERATURE": ""}  # untouched
    assert settings.values["AGENTCRON_MODEL"] == "offline"
    assert settings.source("AGENTCRON_MODEL") == "env"
    assert settings.values["AGENTCRON_MAX_STEPS"] == "12"
    assert settings.source("AGENTCRON_MAX_STEPS") == "file"
    assert settings.values["AGENTCRON_TEMPERATURE"] == "0.3"  # empty = unset: the file's
    assert settings.source("AGENTCRON_THINKING") == "default"
    assert Settings.load(None, env).from_file == frozenset()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[agnet]\nmodel = 'x'", r"unknown section \[agnet\]; the sections are \[agent\]"),
        ("[agent]\nmodle = 'x'", r"unknown setting 'modle' in \[agent\]; known: model, "),
        ("[agent]\ntemperature = 'hot'", r"agent.temperature must be a number, got 'hot'"),
        ("[agent]\nmax_steps = 2.5", r"agent.max_steps must be a whole number, got 2.5"),
        ("[server]\nunified = 'yes'", r"server.unified must be true or false, got 'yes'"),
        ("[engine]\nmax_jobs = 'lots'", r'engine.max_jobs must be a whole number or "none"'),
        ("[webhook]\nchannels = 'ops'", r"webhook.channels must be a list of names or ids"),
        ("[agent]\nmodel = 5", r"agent.model must be text, got 5"),
        ("model = 'x'", r"unknown section \[model\]"),
        ("[agent\n", r"is not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as caught:
        read_config(path)
    assert str(path) in str(caught.value)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the configuration file .*No such file"):
        read_config(tmp_path / "nope.toml")


def test_secrets_are_never_shown_whole() -> None:
    assert mask("sk-abcdefghijklmnop1234") == "****1234"
    assert mask("short") == "(set)"


def test_config_show_says_where_each_value_came_from(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    env = CLEAN | {"AGENTCRON_MAX_STEPS": "9", "AGENTCRON_TOKEN": "tok-0123456789abcdef"}
    result = CliRunner().invoke(app, ["--config", str(path), "config", "show"], env=env)
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split(maxsplit=2)[1:] for line in result.output.splitlines()[1:]}
    assert result.output.splitlines()[0] == f"configuration file: {path}"
    assert lines["agent.max_steps"] == ["env", "9"]  # the environment wins over the file
    assert lines["agent.model"] == ["file", "openai:gpt-4o"]
    assert lines["agent.temperature"] == ["file", "0.3"]
    assert lines["agent.api_key"] == ["file", "****1234"]  # secrets masked
    assert lines["server.token"] == ["env", "****cdef"]
    assert lines["engine.history_budget"] == ["file", "8000"]
    assert lines["agent.thinking"] == ["default", "the model's"]
    assert "sk-abcdefghijklmnop1234" not in result.output
    assert "tok-0123456789abcdef" not in result.output


def test_config_show_json_and_the_environment_variable_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    env = CLEAN | {"AGENTCRON_CONFIG": str(path)}
    result = CliRunner().invoke(app, ["config", "show", "--json"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["config"] == str(path)
    rows = {r["key"]: r for r in data["settings"]}
    assert rows["agent.model"] == {"key": "agent.model", "env": "AGENTCRON_MODEL",
                                   "value": "openai:gpt-4o", "source": "file", "secret": False}  # fmt: skip
    assert rows["agent.api_key"]["value"] == "****1234"


def test_a_bad_file_stops_every_command_with_exit_code_2(tmp_path: Path) -> None:
    path = write(tmp_path, "[agent]\ntemperature = 'hot'\n")
    result = CliRunner().invoke(app, ["--config", str(path), "config", "show"], env=CLEAN)
    assert result.exit_code == 2
    assert "agent.temperature must be a number, got 'hot'" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("flag", "env", "used"), [(True, True, "flag"), (False, True, "env"), (False, False, "file")]
)
def test_a_flag_wins_over_the_environment_which_wins_over_the_file(
    tmp_path: Path, flag: bool, env: bool, used: str
) -> None:
    path = write(tmp_path, f'[server]\ndb = "{tmp_path / "file.db"}"\n')
    environ = CLEAN | ({"AGENTCRON_DB": str(tmp_path / "env.db")} if env else {})
    args = ["--config", str(path), "db", "upgrade"]
    if flag:
        args += ["--db", str(tmp_path / "flag.db")]
    result = CliRunner().invoke(app, args, env=environ)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{tmp_path / f'{used}.db'}: schema at revision")


def test_the_example_file_names_every_setting_and_reads_back(tmp_path: Path) -> None:
    text = dump_example()
    for setting in SETTINGS:
        assert f"# {setting.key.partition('.')[2]} = ..." in text
    assert read_config(write(tmp_path, text)) == {}  # all commented out: valid, sets nothing


@pytest.mark.parametrize(
    ("args", "env", "port", "url"),
    [
        ([], {}, 9001, "postgresql+psycopg://u@db/file"),  # the file
        ([], {"AGENTCRON_PORT": "9002"}, 9002, "postgresql+psycopg://u@db/file"),  # env > file
        (["--port", "9003"], {"AGENTCRON_PORT": "9002"}, 9003, "postgresql+psycopg://u@db/file"),
        (["--db", "x.db"], {}, 9001, "sqlite:///x.db"),  # the --db flag wins over the file's URL
    ],
)
def test_serve_takes_its_settings_flag_over_env_over_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    port: int,
    url: str | None,
) -> None:
    from agentcron.server import serve as serve_module

    seen: list[Any] = []
    monkeypatch.setattr(serve_module, "run", lambda options, echo: seen.append(options))
    path = write(tmp_path, '[server]\nport = 9001\nhost = "0.0.0.0"\nlog_level = "debug"\n'
                           'database_url = "postgresql+psycopg://u@db/file"\n')  # fmt: skip
    result = CliRunner().invoke(app, ["--config", str(path), "serve", *args], env=CLEAN | env)
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert (options.port, options.host, options.log_level, options.url) == (
        port, "0.0.0.0", "debug", url,
    )  # fmt: skip


def test_serve_refuses_both_database_flags(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["serve", "--db", "x.db", "--url", "postgresql+psycopg://u@db/x"], env=CLEAN
    )
    assert result.exit_code == 2
    assert "give --db or --url, not both" in result.output


def test_every_environment_variable_the_code_reads_is_a_setting_of_the_file() -> None:
    """A new `AGENTCRON_*` variable without a `[section] key` fails here (the file is meant to
    hold every setting the environment can set).
    """
    import re

    import agentcron

    root = Path(agentcron.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        found |= set(re.findall(r'"(AGENTCRON_[A-Z_]+)"', path.read_text("utf-8")))
    covered = {s.env for s in SETTINGS} | {"AGENTCRON_CONFIG"}  # the file names itself
    assert sorted(found - covered) == []
    assert len(found) >= 25


def test_config_show_names_the_database_in_use_and_where_it_came_from(tmp_path: Path) -> None:
    home = CLEAN | {"AGENTCRON_HOME": str(tmp_path)}
    default = CliRunner().invoke(app, ["config", "show"], env=home)
    assert f"database: SQLite file {tmp_path / 'agentcron.db'}  (default)\n" in default.stdout
    path = write(tmp_path, '[server]\ndb = "postgres://cron:hunter2-pw@db.example/cron"\n')
    from_file = CliRunner().invoke(app, ["--config", str(path), "config", "show"], env=home)
    assert from_file.exit_code == 0, from_file.output
    assert (
        "database: PostgreSQL postgresql+psycopg://cron:***@db.example/cron  "
        "(file: server.db, $AGENTCRON_DB)\n"
    ) in from_file.stdout
    rows = {line.split()[0]: line.split()[1:] for line in from_file.stdout.splitlines()[2:]}
    assert rows["server.db"] == ["file", "postgres://cron:***@db.example/cron"]
    assert "hunter2-pw" not in from_file.output
    older = home | {"AGENTCRON_DATABASE_URL": "postgresql://u@other/cron"}
    shown = CliRunner().invoke(app, ["--config", str(path), "config", "show"], env=older)
    assert (  # the older variable wins, as it does for `serve`
        "database: PostgreSQL postgresql+psycopg://u@other/cron  "
        "(env: server.database_url, $AGENTCRON_DATABASE_URL)\n"
    ) in shown.stdout


@pytest.mark.parametrize(
    ("env", "heartbeat", "takeover"),
    [
        ({}, 1.0, 10.0),
        ({"AGENTCRON_TAKEOVER": "30"}, 1.0, 30.0),
        ({"AGENTCRON_OWNER_HEARTBEAT": "0.5", "AGENTCRON_TAKEOVER": "2"}, 0.5, 2.0),
    ],
)
def test_the_replicas_heartbeat_and_takeover_come_from_the_environment(
    env: dict[str, str], heartbeat: float, takeover: float
) -> None:
    settings = settings_from_env(env)
    assert settings.owner_heartbeat.total_seconds() == heartbeat
    assert settings.takeover.total_seconds() == takeover


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"AGENTCRON_TAKEOVER": "soon"}, "AGENTCRON_TAKEOVER must be a number of seconds"),
        ({"AGENTCRON_TAKEOVER": "nan"}, "AGENTCRON_TAKEOVER must be a number of seconds"),
        ({"AGENTCRON_OWNER_HEARTBEAT": "0"}, "AGENTCRON_OWNER_HEARTBEAT must be a number"),
        ({"AGENTCRON_TAKEOVER": "2"}, "at least three heartbeats"),
    ],
)
def test_a_bad_takeover_or_heartbeat_is_refused_clearly(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        settings_from_env(env)
