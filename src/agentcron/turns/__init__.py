"""Internal: turns of sessions: the lanes (one turn at a time per session), turn records,
prompts, memory.

Public names: none; turns are reached through `agentcron.AgentCron` (`cron.sessions`) and run
by an `agentcron.Runner`.
"""
