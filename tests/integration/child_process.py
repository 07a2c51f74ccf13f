"""A child process for the real-process crash tests: start, wait for "ready", kill -9, exit."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

EXIT_TIMEOUT = 15.0


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
    def start(cls, script: Path, args: list[str], log_path: Path, label: str) -> ChildProcess:
        log = log_path.open("wb")
        try:
            proc = subprocess.Popen(
                [sys.executable, str(script), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                bufsize=0,
            )
        except BaseException:
            log.close()
            raise
        return cls(proc, log_path, log, label)

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
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.log.close()
