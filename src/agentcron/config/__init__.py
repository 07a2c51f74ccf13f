"""Internal: configuration: every setting read in one package, into one `Settings` object.

The modules, one concern each: `env` (the one reader of the process environment, the text
parsers, `ConfigError`), `file` (the TOML file and the table of settings), `engine`, `agent`,
`server` (the server, the data directory and tokens, the sessions' mode, the CLI's API),
`database` (where the database is), `channels`, `wake`, `relay`, `tools` (the `[tools]` table)
and `settings` (`Settings`: the environment over the file, and each part on demand).
Nothing here imports anything of agentcron above the domain.

Public names: `agentcron.EngineSettings`, `agentcron.AgentSettings`, `agentcron.WakeSettings`
and `agentcron.ConfigError`.
"""

from agentcron.config.agent import (
    DEFAULT_MAX_STEPS,
    THINKING_LEVELS,
    AgentSettings,
    ProviderSettings,
    RunnerSettings,
    agent_settings_from_env,
    check_model_name,
    load_price_table,
)
from agentcron.config.engine import (
    DEFAULT_HISTORY_BUDGET,
    DEFAULT_MAX_JOBS,
    PG_CLAIM_AHEAD,
    EngineSettings,
    history_budget_from_env,
    max_jobs_from_env,
    settings_from_env,
)
from agentcron.config.env import ConfigError, env_flag
from agentcron.config.server import (
    SHARED_CHAT_ENV,
    UNIFIED_ENV,
    UNIFIED_SESSION_KEY,
    UNIFIED_SESSION_TITLE,
    data_dir,
)
from agentcron.config.settings import Settings

__all__ = [
    "DEFAULT_HISTORY_BUDGET",
    "DEFAULT_MAX_JOBS",
    "DEFAULT_MAX_STEPS",
    "PG_CLAIM_AHEAD",
    "SHARED_CHAT_ENV",
    "THINKING_LEVELS",
    "UNIFIED_ENV",
    "UNIFIED_SESSION_KEY",
    "UNIFIED_SESSION_TITLE",
    "AgentSettings",
    "ConfigError",
    "EngineSettings",
    "ProviderSettings",
    "RunnerSettings",
    "Settings",
    "agent_settings_from_env",
    "check_model_name",
    "data_dir",
    "env_flag",
    "history_budget_from_env",
    "load_price_table",
    "max_jobs_from_env",
    "settings_from_env",
]
