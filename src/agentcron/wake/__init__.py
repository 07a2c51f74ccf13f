"""Internal: what wakes the engine: the local timer (default) or a managed wake through a relay.

`provider.py` holds the seam (`WakeProvider`, `LocalWake`, `ManagedWake`, `resolve`),
`arms.py` the client of the relay's arm API (`ArmClient`, `RelayArms`), `verify.py` the fire
token's verifier (JWKS cache + PyJWT); the `[wake]` settings are `agentcron.config.wake`.

Public names: `agentcron.ArmClient`, `agentcron.RelayArms`, `agentcron.ManagedWake`,
`agentcron.resolve_wake` and `agentcron.WakeSettings` (see `agentcron.interfaces`).
"""
