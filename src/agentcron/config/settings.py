"""`Settings`: every setting of one process, read once (the environment over the configuration
file over the defaults, a flag over all of them), and what `agentcron config show` prints.

The CLI builds one `Settings` at start-up and passes it down (to `serve`, the relay, its
backends); the library builds one from the environment when it is given none. Nothing is
written into the environment. Each part (`engine()`, `agent()`, `server()`, ...) is parsed
when it is asked for, with the flags that part has, so a bad value stops only what uses it
(`config show` still shows it) and raises the same `ConfigError` it always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from agentcron.config.agent import (
    TOOLS_FILE_ENV,
    AgentSettings,
    ProviderSettings,
    RunnerSettings,
    agent_settings_from_env,
    provider_from_env,
    runner_settings_from_env,
)
from agentcron.config.channels import ChannelSettings, channel_settings_from_env
from agentcron.config.database import DatabaseTarget, database_from_env, safe_url
from agentcron.config.engine import EngineSettings, settings_from_env
from agentcron.config.env import environ
from agentcron.config.file import SETTINGS, Setting, mask, read_config
from agentcron.config.jobs import JobsSettings, jobs_settings_from_env
from agentcron.config.relay import RelaySettings, relay_home, relay_settings_from_env
from agentcron.config.server import (
    CliSettings,
    DataSettings,
    ServerSettings,
    SessionSettings,
    cli_settings_from_env,
    data_settings_from_env,
    server_settings_from_env,
    session_settings_from_env,
)
from agentcron.config.tools import ToolConfig, load
from agentcron.config.wake import WakeSettings, wake_settings_from_env

__all__ = ["Effective", "Settings", "Source", "effective_json"]

Source = Literal["env", "file", "default"]


@dataclass(frozen=True, slots=True)
class Effective:
    """A setting's effective value and where it came from."""

    setting: Setting
    value: str
    source: Source


@dataclass(frozen=True)
class Settings:
    """The values every setting is read from: the environment, and under it the configuration
    file (`file`): a variable that is unset or empty takes the file's value. `values` holds the
    whole environment (an MCP server's `${NAME}` may name any variable); `from_file` names the
    variables whose value is the file's. `Settings()` sets nothing (every default);
    `Settings.load()` reads the environment.
    """

    values: Mapping[str, str] = field(default_factory=dict, repr=False)
    from_file: frozenset[str] = frozenset()
    file: Path | None = None

    @classmethod
    def load(cls, file: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
        """The settings of `env` (default: the process environment, read now) over those of
        the configuration file `file` (ConfigError naming the file and the key when it is not
        usable).
        """
        values = dict(environ() if env is None else env)
        from_file = set()
        for name, value in (read_config(file) if file is not None else {}).items():
            if not values.get(name):
                values[name] = value
                from_file.add(name)
        return cls(MappingProxyType(values), frozenset(from_file), file)

    # -- the parts ----------------------------------------------------------------------------

    def engine(self) -> EngineSettings:
        """`[engine]`: the job limit, the history budget, the replicas' heartbeat and takeover."""
        return settings_from_env(self.values)

    def jobs(self) -> JobsSettings:
        """`[jobs]`: the policy hook asked before the agent changes a job."""
        return jobs_settings_from_env(self.values)

    def agent(self) -> AgentSettings:
        """`[agent]`: the built-in agent's model, prompt and model settings."""
        return agent_settings_from_env(self.values)

    def provider(self) -> ProviderSettings:
        """`[agent]`: where named models run, the price table, the offline model's pace."""
        return provider_from_env(self.values)

    def runner(self, *, url: str | None = None) -> RunnerSettings:
        """`[runner]`: your own agent over HTTP (its URL, secret and bounds); `--runner-url`
        wins.
        """
        return runner_settings_from_env(self.values, url=url)

    def data(self) -> DataSettings:
        """`[server]`: the data directory and the tokens."""
        return data_settings_from_env(self.values)

    def server(
        self, *, host: str | None = None, port: int | None = None, log_level: str | None = None
    ) -> ServerSettings:
        """`[server]`: what `serve` binds and its public URL; the flags win."""
        return server_settings_from_env(self.values, host=host, port=port, log_level=log_level)

    def sessions(
        self, *, unified: bool | None = None, shared_chat: bool | None = None
    ) -> SessionSettings:
        """`[server] unified`: whether web chats share one memory; `[server] shared_chat`:
        whether shared automations reply in their own chat; the flags win.
        """
        return session_settings_from_env(self.values, unified=unified, shared_chat=shared_chat)

    def cli(self, *, url: str | None = None) -> CliSettings:
        """`[cli]`: the server the CLI talks to; `--api` wins."""
        return cli_settings_from_env(self.values, url=url)

    def database(self, *, url_env: bool = True) -> DatabaseTarget:
        """`[server] db`, `database_url`: the database when no flag names one (`url_env`:
        `database_url` counts, as for `serve` and `db upgrade`; the demo reads `db` only).
        """
        return database_from_env(self.values, url_env=url_env)

    def channels(self) -> ChannelSettings:
        """`[webhook]`, `[telegram]`."""
        return channel_settings_from_env(self.values)

    def wake(self, *, provider: str | None = None) -> WakeSettings:
        """`[wake]`: what wakes the engine; `--wake` wins."""
        return wake_settings_from_env(self.values, provider=provider)

    def relay(
        self,
        *,
        host: str | None = None,
        port: int | None = None,
        home: Path | None = None,
        issuer: str | None = None,
        deadline: float | None = None,
        allow_private: bool | None = None,
    ) -> RelaySettings:
        """`[relay]`: the relay's settings; each flag given wins."""
        return relay_settings_from_env(
            self.values,
            host=host,
            port=port,
            home=home,
            issuer=issuer,
            deadline=deadline,
            allow_private=allow_private,
        )

    def relay_home(self, home: Path | None = None) -> Path:
        """`[relay] home`: the relay's directory; `--home` wins."""
        return relay_home(home, self.values)

    def tools_file(self, flag: Path | None = None) -> Path | None:
        """The file whose `[tools]` table gives the agent's tools: `--tools`, else
        `[agent] tools_file`, else the configuration file, else none.
        """
        if flag is not None:
            return flag
        named = self.values.get(TOOLS_FILE_ENV, "")
        return Path(named) if named else self.file

    def tools(self, flag: Path | None = None) -> ToolConfig:
        """The `[tools]` table of `tools_file(flag)` (empty when none), its servers' `${NAME}`
        expanded from these values.
        """
        path = self.tools_file(flag)
        return ToolConfig(environ=self.values) if path is None else load(path, self.values)

    # -- what `config show` prints ------------------------------------------------------------

    def source(self, name: str | None) -> Source:
        """Where the value of the variable `name` came from (None: nothing set it)."""
        if name is None or not self.values.get(name):
            return "default"
        return "file" if name in self.from_file else "env"

    def effective(self) -> list[Effective]:
        """Each setting's value (secrets masked, a database URL's password hidden) and its
        source.
        """
        rows = []
        for setting in SETTINGS:
            raw = self.values.get(setting.env, "")
            if not raw:
                rows.append(Effective(setting, setting.default, "default"))
                continue
            value = mask(raw) if setting.secret else safe_url(raw) if setting.kind == "db" else raw
            rows.append(Effective(setting, value, self.source(setting.env)))
        return rows


def effective_json(rows: list[Effective]) -> list[dict[str, Any]]:
    return [
        {
            "key": r.setting.key,
            "env": r.setting.env,
            "value": r.value,
            "source": r.source,
            "secret": r.setting.secret,
        }
        for r in rows
    ]
