"""Browser tests: the real server in the test's event loop (fake clock, offline model) and
Debian's Chromium driven by Playwright's async API.

Run: `.venv/bin/pytest tests/e2e -m e2e`. They need /usr/bin/chromium (`apt-get install chromium`);
never `playwright install`. With AGENTCRON_SCREENSHOTS=1 they also write docs/screenshots/*.png.

One Chromium per test module (launching it is most of a test's setup): every test gets its own
browser context (cookies, storage, its page) and its own server, and runs in the module's event
loop, where the browser lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from playwright.async_api import Browser, Page, async_playwright, expect

from agentcron.agent.gate import ToolLike
from agentcron.app import AgentCron
from agentcron.server import serve
from agentcron.server.serve import ServeOptions, Server, build
from agentcron.testing import FakeClock

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
# Monday 2026-11-23, 08:00 in the browser's zone (Europe/Berlin, UTC+1).
T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
BROWSER_TZ = "Europe/Berlin"
WPS = "40"  # the offline model streams visibly, but fast
SCREENSHOTS_ENV = "AGENTCRON_SCREENSHOTS"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
_KEY_PATTERN = re.compile(r"^websocket:[0-9a-f]{16}$")
STARTUP_S = 10.0

# Playwright's own waits (expect, actions) give up well inside the per-test timeout.
expect.set_options(timeout=8_000)
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests run in their module's event loop: the one the module's browser lives in
    (Playwright's objects belong to the loop that made them).
    """
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.asyncio(loop_scope="module"), append=False)


class StreamGate:
    """The offline model's pause between streamed words; a test can hold a reply mid-stream."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self.held = asyncio.Event()
        self._after = 0
        self._count = 0

    def hold_after(self, words: int) -> None:
        """Hold the next reply after `words` words, until `release()`."""
        self._after, self._count = words, 0
        self.held.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def step(self) -> None:
        """Let one more word through, then hold again."""
        self.release()
        self.hold_after(1)

    async def sleep(self, seconds: float) -> None:
        if not self._open.is_set():
            self._count += 1  # called before each word after the first
            if self._count >= self._after:
                self.held.set()
                await self._open.wait()
                return
        await asyncio.sleep(seconds)


@dataclass
class Ui:
    """One running server: its address, token, fake clock and AgentCron."""

    url: str
    token: str
    clock: FakeClock
    server: Server
    gates: list[StreamGate] = field(default_factory=list)

    @property
    def cron(self) -> AgentCron:
        return self.server.cron


StartServer = Callable[..., Awaitable[Ui]]


def _listening_socket() -> socket.socket:
    """A bound socket on a free port, handed to uvicorn (no race for the port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest_asyncio.fixture(loop_scope="module")
async def start_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StartServer]:
    """`await start_server(model=None, tools=(), **library)`: `agentcron serve` in this event
    loop, on a temp dir; `tools` and `library` (e.g. `approval_timeout`) are given to its
    AgentCron (the library's own options, which `serve` lacks).
    """
    for name in list(os.environ):
        if name.startswith("AGENTCRON_") and name != SCREENSHOTS_ENV:
            monkeypatch.delenv(name)  # no token, model or channel from the developer's shell
    monkeypatch.setenv("AGENTCRON_OFFLINE_WPS", WPS)
    running: list[tuple[uvicorn.Server, asyncio.Task[None], socket.socket, Ui]] = []

    async def start(model: Any = None, tools: Sequence[ToolLike] = (), **library: Any) -> Ui:
        clock = FakeClock(T0)
        sock = _listening_socket()
        port = sock.getsockname()[1]
        # `model`: None runs what `agentcron serve` runs (the offline model, paced by the env);
        # a test may pass a model object (AgentCron accepts one) to control the stream.
        options = ServeOptions(db=tmp_path / "agentcron.db", home=tmp_path / "home", port=port)
        options.model = model
        with monkeypatch.context() as patch:
            if tools or library:
                own = functools.partial(AgentCron, tools=list(tools), **library)
                patch.setattr(serve, "AgentCron", own)
            server = build(options, clock=clock)
        config = uvicorn.Config(
            server.app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
        )
        uv = uvicorn.Server(config)
        task = asyncio.create_task(uv.serve(sockets=[sock]))
        ui = Ui(f"http://127.0.0.1:{port}/", server.token, clock, server)
        running.append((uv, task, sock, ui))
        deadline = asyncio.get_running_loop().time() + STARTUP_S
        while not uv.started:
            if task.done():
                task.result()  # raises the start-up error
                pytest.fail("the server stopped during start-up")
            if asyncio.get_running_loop().time() > deadline:
                pytest.fail(f"the server did not start within {STARTUP_S} s")
            await asyncio.sleep(0.01)  # polling uvicorn's flag: it offers no event to wait on
        return ui

    yield start
    for uv, task, sock, ui in reversed(running):
        for gate in ui.gates:
            gate.release()  # a held turn must not keep the shutdown waiting
        uv.should_exit = True
        try:
            await asyncio.wait_for(task, STARTUP_S)
        finally:
            sock.close()


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's Chromium; without it the browser tests fail (they are never skipped)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: run `apt-get install chromium` "
            "(Playwright's own browser download, `playwright install`, is not used)"
        )
    return CHROMIUM


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    """One Chromium for the module's tests (each test opens its own context in it)."""
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A fresh 1280x800 page (en-US, Europe/Berlin); an uncaught script error fails the test."""
    context = await browser.new_context(
        viewport={"width": 1280, "height": 800}, locale="en-US", timezone_id=BROWSER_TZ
    )
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        with contextlib.suppress(Exception):
            await context.close()
    assert not errors, f"script errors in the page: {errors}"


OpenPage = Callable[..., Awaitable[Page]]


@pytest_asyncio.fixture(loop_scope="module")
async def open_page(browser: Browser) -> AsyncIterator[OpenPage]:
    """`await open_page(width=, height=, timezone_id=)`: a page of its own context (en-US) with
    that viewport and browser zone; as `page`, an uncaught script error fails the test.
    """
    contexts: list[Any] = []
    errors: list[str] = []

    async def open_one(width: int = 1280, height: int = 800, timezone_id: str = BROWSER_TZ) -> Page:
        context = await browser.new_context(
            viewport={"width": width, "height": height}, locale="en-US", timezone_id=timezone_id
        )
        contexts.append(context)
        opened = await context.new_page()
        opened.on("pageerror", lambda error: errors.append(str(error)))
        return opened

    try:
        yield open_one
    finally:
        for context in contexts:
            with contextlib.suppress(Exception):
                await context.close()
    assert not errors, f"script errors in the page: {errors}"


# -- helpers for the tests -------------------------------------------------------------------


async def log_in(page: Page, ui: Ui, fragment: str = "") -> None:
    """Open the web UI (with `fragment`, e.g. a chat's link) and log in with the token."""
    await page.goto(ui.url + fragment)
    await page.get_by_label("Access token").fill(ui.token)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.locator("#conn-status")).to_have_text("Live")


async def new_chat(page: Page) -> str:
    """Click "New chat"; returns the new session's key once the chat is open."""
    before = await page.locator("#chat-key").text_content()
    await page.get_by_role("button", name="New chat", exact=True).click()
    await expect(page.locator("#chat-key")).not_to_have_text(before or "")
    await expect(page.locator("#chat-key")).to_have_text(_KEY_PATTERN)
    await expect(page.get_by_role("textbox", name="Message")).to_be_enabled()
    key = await page.locator("#chat-key").text_content()
    assert key is not None
    return key


async def say(page: Page, text: str) -> None:
    composer = page.get_by_role("textbox", name="Message")
    await composer.fill(text)
    await composer.press("Enter")


async def screenshot(page: Page, name: str) -> None:
    """docs/screenshots/<name>.png, only with AGENTCRON_SCREENSHOTS=1 (CI leaves the checkout)."""
    if os.environ.get(SCREENSHOTS_ENV) != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / f"{name}.png")
