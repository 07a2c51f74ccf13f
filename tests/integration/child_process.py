"""A child process for the real-process crash tests: start, wait for "ready", kill -9, exit."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

EXIT_TIMEOUT = 15.0
HELD = Path(__file__).with_name("held_child.py")


def journal_lines(path: Path) -> list[str]:
    """The whole lines of a child's journal (none while it does not exist).

    A last line without its newline is one being written (the parent reads while the children
    run) or one a kill -9 cut short (a write across a page boundary can stop between pages):
    as far as the journal says, the child had not written it yet.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    *lines, _partial = text.split("\n")
    return lines


@dataclass
class ChildProcess:
    """One run of a child script; stdout is a pipe (the ready line), stderr goes to a file."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    label: str
    out: bytes = b""
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.pid = self.proc.pid

    @classmethod
    def start(
        cls, script: Path, args: list[str], log_path: Path, label: str, *, held: bool = False
    ) -> ChildProcess:
        """Start the script; `held`: it imports agentcron, then waits for `go()` to run."""
        log = log_path.open("wb")
        command = [str(HELD), str(script)] if held else [str(script)]
        try:
            proc = subprocess.Popen(
                [sys.executable, *command, *args],
                stdin=subprocess.PIPE if held else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                bufsize=0,
            )
        except BaseException:
            log.close()
            raise
        return cls(proc, log_path, log, label)

    def go(self) -> None:
        """Let a held child run its script."""
        if self.proc.stdin is None:
            raise RuntimeError(f"{self.name} was not started held")
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()

    @property
    def name(self) -> str:
        return f"child {self.pid} ({self.label})"

    def stderr_tail(self, chars: int = 3000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def tracebacks(self) -> str | None:
        """The end of its log if it logged a traceback."""
        log = self.stderr_tail(10**6)
        return log[-3000:] if "Traceback" in log else None

    def _read_some(self, timeout: float) -> bool:
        """Read what stdout has within `timeout`; False at EOF."""
        if self.proc.stdout is None:
            raise RuntimeError("the child's stdout is not a pipe")
        ready, _, _ = select.select([self.proc.stdout], [], [], max(timeout, 0.0))
        if not ready:
            return True
        chunk = os.read(self.proc.stdout.fileno(), 4096)
        self.out += chunk
        return bool(chunk)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while b"ready" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{self.name} not ready after {timeout}s\n{self.stderr_tail()}"
                )
            if not self._read_some(min(left, 0.2)):
                self.proc.wait(timeout=EXIT_TIMEOUT)
                raise AssertionError(
                    f"{self.name} exited ({self.proc.returncode}) before ready\n"
                    f"{self.stderr_tail()}"
                )

    def kill9(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.name} died on its own ({self.proc.returncode}) before the kill\n"
                f"{self.stderr_tail()}"
            )
        os.kill(self.pid, signal.SIGKILL)
        # Reap it now: a zombie still answers kill(pid, 0), so the next engine would think its
        # owner alive and leave its fires and turns to the leases instead of settling them.
        code = self.proc.wait(timeout=EXIT_TIMEOUT)
        if code != -signal.SIGKILL:
            raise AssertionError(f"{self.name} ended with {code}, not by the kill")

    def wait_exit(self, timeout: float = EXIT_TIMEOUT) -> str:
        """Wait for a clean exit (code 0); return everything it printed."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s\n{self.stderr_tail()}"
            ) from None
        while self._read_some(1.0):
            pass
        assert code == 0, f"{self.name} exited {code}\n{self.stderr_tail()}"
        return self.out.decode()

    def close(self) -> None:
        """Always safe: kill if still running, reap, close the pipe and the log."""
        try:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=EXIT_TIMEOUT)
        finally:
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None and not pipe.closed:
                    pipe.close()
            self.log.close()


class OneAhead:
    """Children of a sequence of runs, each started held one run ahead: the next one imports
    while the current one runs, so a restart costs no import time.
    """

    def __init__(self, start: Callable[[int, str], ChildProcess], modes: list[str]) -> None:
        self._start = start  # (cycle, mode) -> a child started held
        self._modes = modes
        self._next: ChildProcess | None = None
        self.children: list[ChildProcess] = []

    def _spawn(self, cycle: int) -> ChildProcess:
        child = self._start(cycle, self._modes[cycle])
        self.children.append(child)
        return child

    def launch(self, cycle: int, mode: str, ready_timeout: float) -> ChildProcess:
        if self._modes[cycle] != mode:
            raise AssertionError(
                f"cycle {cycle} was planned as {self._modes[cycle]!r}, not {mode!r}"
            )
        child, self._next = self._next, None
        if child is None or child.label != mode:
            child = self._spawn(cycle)
        child.go()
        if cycle + 1 < len(self._modes):
            self._next = self._spawn(cycle + 1)
        child.wait_ready(ready_timeout)
        return child

    def close(self) -> None:
        for child in self.children:
            child.close()
