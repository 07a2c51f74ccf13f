"""Run one job's gate (domain/gates.py), bounded: a command (asyncio subprocess, no shell, its
own process group, killed with it at the timeout), an HTTP GET (httpx) or a Python entry point
("module:function", sync in a thread or async). Output is cut at the gate's `max_output`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from agentcron.domain.gates import (
    CODE_KINDS,
    Gate,
    GateKind,
    GateResult,
    GateVerdict,
    bounded,
    command_verdict,
    http_verdict,
    python_verdict,
    tail,
)

log = logging.getLogger(__name__)

GATES_OFF = (
    "gates that run code (command, python) are off on this server: set [engine] gates = true "
    "(AGENTCRON_GATES=1)"
)


async def run_gate(gate: Gate, *, allow_code: bool) -> GateResult:
    """The gate's answer; never raises for what the gate does (a failure is an `ERROR`
    result with the reason). `allow_code`: the setting `[engine] gates`.
    """
    if gate.kind in CODE_KINDS and not allow_code:
        return GateResult(GateVerdict.ERROR, error=GATES_OFF)
    try:
        if gate.kind is GateKind.COMMAND:
            return await _command(gate)
        if gate.kind is GateKind.HTTP:
            return await asyncio.wait_for(_http(gate), gate.timeout_s)
        return await asyncio.wait_for(_python(gate), gate.timeout_s)
    except TimeoutError:
        return GateResult(GateVerdict.ERROR, error=f"timed out after {gate.timeout_s:g} s")
    except Exception as exc:  # the gate's own failure: the run says why
        return GateResult(GateVerdict.ERROR, error=tail(f"{type(exc).__name__}: {exc}"))


async def _command(gate: Gate) -> GateResult:
    argv = list(gate.target) if isinstance(gate.target, tuple) else [gate.target]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
    except OSError as exc:
        return GateResult(GateVerdict.ERROR, error=f"cannot start {argv[0]!r}: {exc.strerror}")
    limit = gate.max_output
    stdout, stderr = bytearray(), bytearray()

    async def read(stream: asyncio.StreamReader | None, into: bytearray) -> None:
        # Read to the end (the process must not block on a full pipe), keep the bound + 1.
        if stream is None:
            return
        while chunk := await stream.read(65536):
            if len(into) <= limit:
                into.extend(chunk[: limit + 1 - len(into)])

    try:
        await asyncio.wait_for(
            asyncio.gather(read(proc.stdout, stdout), read(proc.stderr, stderr), proc.wait()),
            gate.timeout_s,
        )
    except (TimeoutError, asyncio.CancelledError):
        _kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    output, cut = bounded(bytes(stdout), limit)
    verdict = command_verdict(proc.returncode)
    if verdict is GateVerdict.ERROR:
        err, _ = bounded(bytes(stderr), limit)
        why = f"exit code {proc.returncode}"
        detail = tail(err) or tail(output)
        return GateResult(verdict, output, f"{why}: {detail}" if detail else why, cut)
    return GateResult(verdict, output, truncated=cut)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _http(gate: Gate) -> GateResult:
    import httpx  # only where a gate is HTTP (`import agentcron` loads no optional library)

    url = str(gate.target)
    limit = gate.max_output
    async with (
        httpx.AsyncClient(timeout=gate.timeout_s, follow_redirects=False) as client,
        client.stream("GET", url) as response,
    ):
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk[: limit + 1 - len(body)])
            if len(body) > limit:
                break
    output, cut = bounded(bytes(body), limit)
    verdict = http_verdict(response.status_code)
    if verdict is GateVerdict.ERROR:
        detail = tail(output)
        why = f"HTTP {response.status_code}"
        return GateResult(verdict, output, f"{why}: {detail}" if detail else why, cut)
    return GateResult(verdict, output, truncated=cut)


async def _python(gate: Gate) -> GateResult:
    function = _entry_point(str(gate.target))
    if inspect.iscoroutinefunction(function):
        value = await function()
    else:
        value = await asyncio.to_thread(function)
        if inspect.isawaitable(value):
            value = await value
    verdict, text = python_verdict(value)
    output, cut = bounded(text.encode("utf-8"), gate.max_output)
    return GateResult(verdict, output, truncated=cut)


def _entry_point(target: str) -> Callable[[], Any]:
    module_name, _, name = target.partition(":")
    function = getattr(importlib.import_module(module_name), name, None)
    if not callable(function):
        raise LookupError(f"{target} is not a function")
    return function  # type: ignore[no-any-return]
