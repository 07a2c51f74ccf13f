"""The scheduling engine: clock, per-job policies and the loop that turns due fires into turns."""

from agentcron.engine.scheduler import Engine
from agentcron.runtime.clock import Clock, SystemClock

__all__ = ["Clock", "Engine", "SystemClock"]
