"""agentcron: cron for AI agent sessions."""

__version__ = "0.1.0.dev0"
