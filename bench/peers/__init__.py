"""Peer benchmark: agentcron next to APScheduler, nanobot and hermes-agent (`python -m bench`)."""
