"""agentcron: cron for AI agent sessions."""

from agentcron.app import AgentCron
from agentcron.version import __version__

__all__ = ["AgentCron", "__version__"]
