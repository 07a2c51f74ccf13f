"""The scheduling engine: clock, per-job policies and the loop that turns due fires into turns."""

from agentcron.engine.clock import Clock, SystemClock
from agentcron.engine.scheduler import Engine

__all__ = ["Clock", "Engine", "SystemClock"]
