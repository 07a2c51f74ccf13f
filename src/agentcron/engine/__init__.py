"""Internal: the scheduling engine: per-job policies, claims, isolated runs and the loop that
turns due fires into turns.

Public names: none; the engine is wired and run by `agentcron.AgentCron`, and reads time only
through `agentcron.Clock`.
"""

from agentcron.engine.scheduler import Engine
from agentcron.runtime.clock import Clock, SystemClock

__all__ = ["Clock", "Engine", "SystemClock"]
