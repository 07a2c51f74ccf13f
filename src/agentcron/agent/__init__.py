"""Internal: the agent side: the runner protocol, the built-in pydantic-ai agent, its tool gate
and tools, the offline model.

Public names: the runner seam is in `agentcron.interfaces` (`agentcron.Runner`,
`agentcron.TurnInput`, `agentcron.Outcome`, `agentcron.paused`, ...); the built-in agent is
`agentcron.BuiltinRunner`, a tool of your own with its approval rule `agentcron.UserTool`, the
scheduling tools for an agent of your own `agentcron.scheduling_tools`.
"""
