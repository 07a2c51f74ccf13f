"""Internal: the HTTP / WebSocket edge: FastAPI routes, the live event stream, auth and metrics.

Public names: `agentcron.create_app` (the app around an `agentcron.AgentCron`); the HTTP API and
the WebSocket protocol are the interface (docs/server.md).
"""

from agentcron.server.asgi import create_app

__all__ = ["create_app"]
