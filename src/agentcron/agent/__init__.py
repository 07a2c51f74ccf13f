"""The agent side: the runner protocol a turn executes through."""
