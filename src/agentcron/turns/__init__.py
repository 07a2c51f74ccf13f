"""Turns of sessions: the lanes (one turn at a time per session), turn records, prompts, memory."""
