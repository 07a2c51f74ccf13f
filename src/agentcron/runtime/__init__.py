"""Internal: the turn runtime: the clock, the group commit, waiters, the slot pool and the one
execution of a runner call (a session turn or an isolated run).

Public names: `agentcron.Clock` and `agentcron.SystemClock`; a runner's pause for a wait is
`agentcron.paused`.
"""
