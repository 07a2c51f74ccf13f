"""Internal: the use cases every edge calls (the library facade, the HTTP routes, the CLI, tools).

Each service (`Jobs`, `Runs`, `Sessions`, `SystemJobs`, `Deliveries`) takes narrow
dependencies (store protocols, the clock, the engine's wake-up, the event bus), raises typed
`AgentcronError`s that the edges map, and answers with domain records or the small read
models defined beside it (`JobState`, `SessionRow`, ...). `AgentCron` (app.py) wires them;
the JSON shapes of the answers are in `agentcron.views`.

Public names: none to import; the services are reached through `agentcron.AgentCron`
(`cron.jobs`, `cron.runs`, `cron.sessions`, `cron.system`, `cron.deliveries`,
`cron.approvals`).
"""
