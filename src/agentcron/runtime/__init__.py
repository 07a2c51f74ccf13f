"""Internal: the turn runtime: the clock, the group commit, waiters, a runner call's guard and
slot.

Public names: `agentcron.Clock` and `agentcron.SystemClock`; a runner's pause for a wait is
`agentcron.paused`.
"""
