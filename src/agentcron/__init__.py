"""agentcron: cron for AI agent sessions."""

from agentcron.app import AgentCron

__version__ = "0.1.0.dev0"

__all__ = ["AgentCron", "__version__"]
