"""A tool module whose import fails (the tools' configuration names it in the tests)."""

raise RuntimeError("BROKEN_TOKEN is not set")
