"""The HTTP / WebSocket edge: FastAPI routes, the live event stream, auth and metrics."""

from agentcron.server.asgi import create_app

__all__ = ["create_app"]
