"""`agentcron relay`: the wake service a managed agent sleeps behind (README "The relay").

`keys.py` (the signing keys and JWKS), `agents.py` (the agents and their credentials),
`service.py` (arms on agentcron's own store and engine, and their delivery), `server.py`
(the HTTP API and `relay serve`).
"""
