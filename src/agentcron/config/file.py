"""The configuration file (TOML): every setting that a flag or an environment variable sets.

Each setting has a `section.name` key in the file and an environment variable; `read_config`
reads a file into {variable: value as text}, checked against each setting's kind, and
`agentcron.config.Settings` puts the environment over it (flag > environment > file >
default). The file is never written into the environment.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentcron.config.agent import DEFAULT_MAX_STEPS
from agentcron.config.database import db_url
from agentcron.config.engine import DEFAULT_HISTORY_BUDGET, DEFAULT_MAX_JOBS, DEFAULT_MIN_INTERVAL
from agentcron.config.env import ConfigError, or_environ
from agentcron.config.server import DEFAULT_API

__all__ = [
    "CONFIG_ENV",
    "SETTINGS",
    "TOOLS_SECTION",
    "Setting",
    "config_path",
    "dump_example",
    "mask",
    "read_config",
    "read_toml",
    "sections",
]

CONFIG_ENV = "AGENTCRON_CONFIG"
TOOLS_SECTION = "tools"  # the agent's tools (`agentcron.config.tools`), not flat settings
_MAX_FILE_BYTES = 1_000_000

Kind = Literal["text", "int", "float", "bool", "list", "limit", "table", "db"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its key in the file (`section.name`), its environment variable, the kind
    of value the file holds, and what `config show` prints for it when nothing sets it.
    """

    key: str
    env: str
    kind: Kind
    help: str
    default: str = "(unset)"
    secret: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("server.host", "AGENTCRON_HOST", "text", "address `serve` binds", "127.0.0.1"),
    Setting("server.port", "AGENTCRON_PORT", "int", "port `serve` listens on", "8321"),
    Setting("server.log_level", "AGENTCRON_LOG_LEVEL", "text", "uvicorn log level", "info"),
    Setting(
        "server.db",
        "AGENTCRON_DB",
        "db",
        "SQLite file or database URL (sqlite:///path, postgresql://user@host/db)",
        "agentcron.db in the data directory",
    ),
    Setting(
        "server.database_url",
        "AGENTCRON_DATABASE_URL",
        "db",
        "a database URL, winning over server.db (older; server.db takes URLs too)",
        secret=True,
    ),
    Setting(
        "server.home",
        "AGENTCRON_HOME",
        "text",
        "data directory (database, tokens)",
        "the user's data directory",
    ),
    Setting(
        "server.token",
        "AGENTCRON_TOKEN",
        "text",
        "API token",
        "created in the data directory",
        secret=True,
    ),
    Setting(
        "server.hook_token",
        "AGENTCRON_HOOK_TOKEN",
        "text",
        "inbound hook token",
        "created in the data directory",
        secret=True,
    ),
    Setting(
        "server.public_url",
        "AGENTCRON_PUBLIC_URL",
        "text",
        "this server's base URL as others reach it (webhook decision URLs)",
    ),
    Setting(
        "server.unified",
        "AGENTCRON_UNIFIED_SESSION",
        "bool",
        "unified mode: web chats share one memory",
        "false",
    ),
    Setting(
        "server.shared_chat",
        "AGENTCRON_UNIFIED_SHARED_CHAT",
        "bool",
        "unified mode: shared automations reply in the Shared chat, not the last active thread",
        "false",
    ),
    Setting(
        "cli.url",
        "AGENTCRON_URL",
        "text",
        "the server the CLI talks to (--api); --db uses a database instead",
        DEFAULT_API,
    ),
    Setting(
        "cli.tz",
        "TZ",
        "text",
        "the IANA zone the CLI shows times in (--tz) where no job's zone applies",
        "the machine's zone",
    ),
    Setting(
        "engine.max_jobs",
        "AGENTCRON_MAX_JOBS",
        "limit",
        "jobs a store may hold",
        str(DEFAULT_MAX_JOBS),
    ),
    Setting(
        "engine.min_interval",
        "AGENTCRON_MIN_INTERVAL",
        "float",
        "seconds: the shortest interval a recurring job from the API, CLI, web UI or agent "
        "may have (0: none)",
        str(int(DEFAULT_MIN_INTERVAL.total_seconds())),
    ),
    Setting(
        "engine.history_budget",
        "AGENTCRON_HISTORY_BUDGET",
        "limit",
        "tokens of history a turn gets",
        str(DEFAULT_HISTORY_BUDGET),
    ),
    Setting(
        "engine.owner_heartbeat",
        "AGENTCRON_OWNER_HEARTBEAT",
        "float",
        "seconds between a process's heartbeats (replicas)",
        "1",
    ),
    Setting(
        "engine.takeover",
        "AGENTCRON_TAKEOVER",
        "float",
        "seconds a silent replica has before it is taken over",
        "10",
    ),
    Setting(
        "engine.gates",
        "AGENTCRON_GATES",
        "bool",
        "jobs' gates may run code here (command, python kinds); an http gate needs no setting",
        "false",
    ),
    Setting("agent.model", "AGENTCRON_MODEL", "text", "model, e.g. openai:gpt-4.1-mini", "offline"),
    Setting(
        "agent.base_url",
        "AGENTCRON_BASE_URL",
        "text",
        "an OpenAI-compatible server (Ollama, vLLM); Anthropic's API for anthropic: models",
    ),
    Setting("agent.api_key", "AGENTCRON_API_KEY", "text", "that server's API key", secret=True),
    Setting(
        "agent.system_prompt",
        "AGENTCRON_SYSTEM_PROMPT",
        "text",
        "system prompt",
        "the built-in prompt",
    ),
    Setting(
        "agent.temperature", "AGENTCRON_TEMPERATURE", "float", "temperature (0-2)", "the model's"
    ),
    Setting(
        "agent.max_tokens", "AGENTCRON_MAX_TOKENS", "int", "max tokens of a response", "the model's"
    ),
    Setting(
        "agent.thinking",
        "AGENTCRON_THINKING",
        "text",
        "thinking: off, on, minimal, low, medium, high, xhigh, max",
        "the model's",
    ),
    Setting(
        "agent.max_steps",
        "AGENTCRON_MAX_STEPS",
        "int",
        "model requests per turn",
        str(DEFAULT_MAX_STEPS),
    ),
    Setting(
        "agent.tools_file",
        "AGENTCRON_TOOLS_FILE",
        "text",
        "a TOML file whose [tools] table gives the agent's tools (README: Tools and approvals)",
        "the [tools] table of this file",
    ),
    Setting(
        "agent.prices",
        "AGENTCRON_PRICES",
        "text",
        "price table override (JSON file)",
        "genai-prices",
    ),
    Setting(
        "agent.offline_wps",
        "AGENTCRON_OFFLINE_WPS",
        "float",
        "offline model's words per second (0 = no delay)",
        "20",
    ),
    # Your own agent over HTTP (README "Your own agent over HTTP"): it runs every turn.
    Setting("runner.url", "AGENTCRON_RUNNER_URL", "text", "your agent's URL", "the built-in agent"),
    Setting(
        "runner.secret",
        "AGENTCRON_RUNNER_SECRET",
        "text",
        "the whsec_ secret its requests are signed with",
        "runner_secret in the data directory",
        secret=True,
    ),
    Setting("runner.timeout", "AGENTCRON_RUNNER_TIMEOUT", "float", "seconds of one turn", "300"),
    Setting(
        "runner.retries",
        "AGENTCRON_RUNNER_RETRIES",
        "int",
        "tries again of a refused connection",
        "3",
    ),
    Setting(
        "runner.concurrency",
        "AGENTCRON_RUNNER_CONCURRENCY",
        "int",
        "requests open to the URL at once",
        "16",
    ),
    Setting(
        "jobs.policy_hook",
        "AGENTCRON_POLICY_HOOK",
        "text",
        "asked before the agent creates, updates or reschedules a job: module:function or URL",
    ),
    Setting(
        "jobs.policy_hook_secret",
        "AGENTCRON_POLICY_HOOK_SECRET",
        "text",
        "the whsec_ secret an HTTP policy hook's requests are signed with",
        secret=True,
    ),
    Setting(
        "jobs.policy_hook_timeout",
        "AGENTCRON_POLICY_HOOK_TIMEOUT",
        "float",
        "seconds a policy hook may take (then: refused)",
        "5",
    ),
    Setting("webhook.url", "AGENTCRON_WEBHOOK_URL", "text", "outbound webhook URL"),
    Setting(
        "webhook.secret", "AGENTCRON_WEBHOOK_SECRET", "text", "webhook signing secret", secret=True
    ),
    Setting(
        "webhook.channels",
        "AGENTCRON_WEBHOOK_CHANNELS",
        "list",
        "session channels the webhook delivers (* = all)",
        "all sessions",
    ),
    Setting(
        "webhook.headers",
        "AGENTCRON_WEBHOOK_HEADERS",
        "table",
        "extra request headers, a table of name = value",
        secret=True,
    ),
    Setting(
        "telegram.token", "AGENTCRON_TELEGRAM_TOKEN", "text", "Telegram bot token", secret=True
    ),
    Setting(
        "telegram.allowed_chats",
        "AGENTCRON_TELEGRAM_ALLOWED_CHATS",
        "list",
        "chat ids allowed to talk to the bot",
    ),
    Setting(
        "telegram.api_base",
        "AGENTCRON_TELEGRAM_API_BASE",
        "text",
        "Bot API base URL",
        "https://api.telegram.org",
    ),
    Setting(
        "channels.delivery_deadline",
        "AGENTCRON_DELIVERY_DEADLINE",
        "float",
        "seconds a channel's delivery is retried while the channel is down",
        "86400",
    ),
    # Managed wake (README "Managed wake"): the relay wakes the agent with a signed fire webhook.
    Setting(
        "wake.provider",
        "AGENTCRON_WAKE",
        "text",
        "what wakes the engine: local or managed",
        "local",
    ),
    Setting(
        "wake.service",
        "AGENTCRON_WAKE_SERVICE",
        "text",
        "the wake service's contract: relay or seed002",
        "relay",
    ),
    Setting(
        "wake.verifier",
        "AGENTCRON_WAKE_VERIFIER",
        "text",
        "the fire token's form: relay or seed002",
        "as wake.service",
    ),
    Setting(
        "wake.relay_url",
        "AGENTCRON_WAKE_RELAY_URL",
        "text",
        "the wake service's base URL (the relay's, or a seed-002 portal's)",
    ),
    Setting(
        "wake.relay_token",
        "AGENTCRON_WAKE_RELAY_TOKEN",
        "text",
        "this agent's credential for the wake service (`agentcron relay add-agent`)",
        secret=True,
    ),
    Setting(
        "wake.callback_url",
        "AGENTCRON_WAKE_CALLBACK_URL",
        "text",
        "this agent's base URL as the relay reaches it (fires go to /api/cron/fire)",
    ),
    Setting("wake.audience", "AGENTCRON_WAKE_AUDIENCE", "text", "this agent's fire token `aud`"),
    Setting(
        "wake.issuer", "AGENTCRON_WAKE_ISSUER", "text", "the relay's token `iss`", "the relay URL"
    ),
    Setting(
        "wake.jwks_url",
        "AGENTCRON_WAKE_JWKS_URL",
        "text",
        "the fire tokens' JWKS (needed for seed002)",
        "{relay_url}/jwks.json",
    ),
    Setting(
        "relay.host", "AGENTCRON_RELAY_HOST", "text", "address `relay serve` binds", "127.0.0.1"
    ),
    Setting("relay.port", "AGENTCRON_RELAY_PORT", "int", "port `relay serve` listens on", "8330"),
    Setting(
        "relay.home",
        "AGENTCRON_RELAY_HOME",
        "text",
        "the relay's directory (keys, agents, database)",
        "relay/ in the data directory",
    ),
    Setting(
        "relay.db",
        "AGENTCRON_RELAY_DB",
        "db",
        "the relay's SQLite file or database URL",
        "relay.db in the relay's directory",
    ),
    Setting(
        "relay.database_url",
        "AGENTCRON_RELAY_DATABASE_URL",
        "db",
        "a database URL for the relay's arms, winning over relay.db (older; relay.db takes URLs)",
        secret=True,
    ),
    Setting(
        "relay.issuer",
        "AGENTCRON_RELAY_ISSUER",
        "text",
        "the `iss` of the fire tokens",
        "http://{host}:{port}",
    ),
    Setting(
        "relay.delivery_deadline",
        "AGENTCRON_RELAY_DELIVERY_DEADLINE",
        "float",
        "seconds a fire is retried before the relay gives up",
        "3600",
    ),
    Setting(
        "relay.allow_private_callbacks",
        "AGENTCRON_RELAY_ALLOW_PRIVATE",
        "bool",
        "call agents back on loopback, link-local and private addresses too",
        "false",
    ),
)
_BY_KEY = {s.key: s for s in SETTINGS}
_SECTIONS = sorted({s.key.partition(".")[0] for s in SETTINGS})


def sections() -> frozenset[str]:
    """The file's sections of settings (besides `[tools]`)."""
    return frozenset(_SECTIONS)


def config_path(explicit: Path | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The configuration file in use: `--config`, else `$AGENTCRON_CONFIG`, else none."""
    if explicit is not None:
        return explicit
    named = or_environ(environ).get(CONFIG_ENV, "").strip()
    return Path(named).expanduser() if named else None


def _as_env(setting: Setting, value: Any, where: str) -> str:
    """A file value as its environment variable's text, checked against the setting's kind."""
    kind = setting.kind
    wrong = f"{where}: {setting.key} must be"
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{wrong} true or false, got {value!r}")
        return "true" if value else "false"
    if kind == "int" or (kind == "limit" and not isinstance(value, str)):
        if isinstance(value, bool) or not isinstance(value, int):
            extra = ' or "none"' if kind == "limit" else ""
            raise ConfigError(f"{wrong} a whole number{extra}, got {value!r}")
        return str(value)
    if kind == "limit":
        if value.strip().lower() != "none":
            raise ConfigError(f'{wrong} a whole number or "none", got {value!r}')
        return "none"
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{wrong} a number, got {value!r}")
        return str(value)
    if kind == "table":
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return json.dumps(value)
        raise ConfigError(f"{wrong} a table of text values, got {value!r}")
    if kind == "list":
        if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
            return ",".join(str(v) for v in value)
        raise ConfigError(f"{wrong} a list of names or ids, got {value!r}")
    if not isinstance(value, str):
        raise ConfigError(f"{wrong} text, got {value!r}")
    if kind == "db":  # a file path or a URL: refused here, naming the file, when neither
        db_url(value, f"{where}: {setting.key}")
    return value


def read_toml(path: Path, what: str, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """A TOML file of at most 1 MB, parsed; `error` naming `what` and the file when it cannot
    be read, is too large, is not UTF-8 or is not TOML.
    """
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            raise error(f"the {what} {path} is larger than 1 MB")
        return tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise error(f"cannot read the {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"the {what} {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"the {what} {path} is not valid TOML: {exc}") from None


def read_config(path: Path) -> dict[str, str]:
    """The settings a configuration file sets, as {environment variable: value}.

    Raises ConfigError naming the file (and the key) for a file that cannot be read, is not
    TOML, names an unknown section or key, or holds a value of the wrong kind.
    """
    data = read_toml(path, "configuration file")
    found: dict[str, str] = {}
    for section, table in data.items():
        if section == TOOLS_SECTION:
            continue  # not settings: `agentcron.config.tools.load` reads and checks it
        if section not in _SECTIONS or not isinstance(table, dict):
            raise ConfigError(
                f"{path}: unknown section [{section}]; the sections are "
                + ", ".join(f"[{s}]" for s in [*_SECTIONS, TOOLS_SECTION])
            )
        for name, value in table.items():
            setting = _BY_KEY.get(f"{section}.{name}")
            if setting is None:
                known = ", ".join(
                    s.key.partition(".")[2] for s in SETTINGS if s.key.startswith(f"{section}.")
                )
                raise ConfigError(
                    f"{path}: unknown setting {name!r} in [{section}]; known: {known}"
                )
            found[setting.env] = _as_env(setting, value, str(path))
    return found


def mask(value: str) -> str:
    """A secret as `config show` prints it: never whole."""
    return f"****{value[-4:]}" if len(value) >= 16 else "(set)"


def dump_example() -> str:
    """A commented example file with every setting (what `config example` prints)."""
    lines = ["# agentcron configuration (TOML); the environment and flags win over it", ""]
    section = ""
    for s in SETTINGS:
        head, _, name = s.key.partition(".")
        if head != section:
            lines += ([""] if section else []) + [f"[{head}]"]
            section = head
        lines.append(f"# {name} = ...  # {s.help}; default: {s.default}  (${s.env})")
    lines += [
        "",
        "# The agent's tools (README: Tools from configuration; `agentcron tools list`):",
        "# [tools]",
        '# python = ["mytools.ci:check_build"]      # module:function entry points',
        "# [tools.mcp.files]                        # command/args/env/cwd, or url/headers",
        '# command = "npx"',
        '# args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]',
        "# [tools.policy]                           # tool name or glob -> allow | approve | deny",
        '# "files_*" = "approve"',
        "# [tools.approval_timeout]                 # seconds, per tool name or glob",
        "# [tools.sessions]                         # session key or glob -> the tools it may use",
    ]
    return "\n".join(lines) + "\n"
