"""The turn runtime: clock, group commit, waiters, slot pool, and the one execution of a turn."""
