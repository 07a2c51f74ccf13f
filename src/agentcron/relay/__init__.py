"""Internal: `agentcron relay`, the wake service managed agents sleep behind (docs/managed-wake.md).

`signing_keys.py` (the signing keys and JWKS), `agents.py` (the agents and their credentials),
`callbacks.py` (where the relay may call), `service.py` (arms on agentcron's own store and
engine, and their delivery), `server.py` (the HTTP API and `relay serve`).

Public names: none; its HTTP API is the interface, spoken by `agentcron.RelayArms`.
"""
