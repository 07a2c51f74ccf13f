"""The turn runtime: the clock, the group commit, waiters, a runner call's guard and slot."""
