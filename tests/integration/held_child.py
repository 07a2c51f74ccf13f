"""A child script started held: agentcron is imported ahead (the slow part of a child's start,
1-2 s) while the parent still needs the process before it; the script runs, in this same
process (same pid), once the parent writes "go" on stdin (`ChildProcess.go`).

Usage: python held_child.py SCRIPT [ARGS...]
"""

from __future__ import annotations

import runpy
import sys

import agentcron.app  # noqa: F401  (imported ahead: the script's own imports are then instant)


def main() -> None:
    script, *args = sys.argv[1:]
    if sys.stdin.readline().strip() != "go":
        sys.exit(3)  # closed without "go": the parent did not need it after all
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
