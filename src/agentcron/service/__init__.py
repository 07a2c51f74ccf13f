"""The use cases the edges call — the HTTP routes and the CLI alike — answering in the API's JSON.

Each function takes the facade and plain values (or the request model it validates), raises
typed `AgentcronError`s (the edges map them) and returns the JSON-ready answer, so the API and
`agentcron ... --db` give the same answers from one code path. The CLI never imports `server/`.
"""
