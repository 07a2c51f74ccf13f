"""List benchmark ("lists that scale"): the first page of `GET /api/sessions` with 100,000
sessions, through the API in process (ASGI), and the web UI's chat list painted in Chromium
(a real server on loopback, a fresh browser context each round), against targets; prints a
metric / measured / target / result table.

    python -m bench.bench_lists [--sessions 100000] [--repeat 50] [--db URL] [--no-browser]

The sessions are written straight into the database in bulk (one multi-row INSERT per chunk),
not through the API: the set-up is not what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.server import create_app
from agentcron.store.database import sync_url
from agentcron.store.schema import sessions as sessions_table
from agentcron.store.sql import SqlStore, sqlite_url

TOKEN = "bench"
FIRST_PAGE_TARGET_MS = 20.0
FIRST_PAINT_TARGET_MS = 300.0
CHROMIUM = Path("/usr/bin/chromium")
PAINT_ROUNDS = 5
_CHUNK = 5_000
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Row:
    metric: str
    measured_ms: float
    target_ms: float | None

    @property
    def result(self) -> str:
        if self.target_ms is None:
            return "-"
        return "pass" if self.measured_ms <= self.target_ms else "FAIL"


def session_rows(count: int) -> list[dict[str, Any]]:
    """`count` sessions, one a second apart (a few share an instant, as real ones do)."""
    return [
        {
            "session_key": f"websocket:bench-{i:06d}",
            "channel": "websocket",
            "chat_id": f"bench-{i:06d}",
            "title": f"Chat number {i}",
            "tz": "UTC",
            "last_seq": 0,
            "created_at": T0 + timedelta(seconds=i // 3),
            "updated_at": T0 + timedelta(seconds=i // 3),
        }
        for i in range(count)
    ]


async def build(url: str, count: int) -> None:
    """agentcron's schema at `url`, then `count` sessions in bulk."""
    store = SqlStore(url)
    await store.open()
    await store.close()
    engine = sa.create_engine(sync_url(url))
    try:
        rows = session_rows(count)
        with engine.begin() as conn:
            for start in range(0, len(rows), _CHUNK):
                conn.execute(sessions_table.insert(), rows[start : start + _CHUNK])
    finally:
        engine.dispose()


async def _no_turns(trigger: Trigger) -> None:
    return None


async def timed(
    call: Callable[[], Awaitable[httpx.Response]], repeat: int
) -> tuple[float, httpx.Response]:
    """The median milliseconds of `repeat` calls (after one warm-up call), and the last answer."""
    answer = await call()
    answer.raise_for_status()
    spent: list[float] = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = await call()
        spent.append((time.perf_counter() - began) * 1000)
        answer.raise_for_status()
    return statistics.median(spent), answer


async def measure(url: str, repeat: int) -> list[Row]:
    cron = AgentCron(url=url, runner=_no_turns)
    await cron.start()
    try:
        transport = httpx.ASGITransport(app=create_app(cron, token=TOKEN))
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers
        ) as api:
            first, page = await timed(lambda: api.get("/api/sessions"), repeat)
            cursor = page.json()["next_cursor"]
            deep_params: dict[str, str] = {}
            for _ in range(100):  # to the 101st page (or the last, in a small run)
                if cursor is None:
                    break
                deep_params = {"cursor": cursor}
                cursor = (await api.get("/api/sessions", params=deep_params)).json()["next_cursor"]
            deep, _ = await timed(lambda: api.get("/api/sessions", params=deep_params), repeat)
            search, _ = await timed(
                lambda: api.get("/api/sessions", params={"q": "number 99999"}), max(repeat // 5, 1)
            )
            runs, _ = await timed(lambda: api.get("/api/runs"), repeat)
    finally:
        await cron.close()
    return [
        Row("GET /api/sessions, first page (50)", first, FIRST_PAGE_TARGET_MS),
        Row("GET /api/sessions, 101st page (cursor)", deep, FIRST_PAGE_TARGET_MS),
        Row("GET /api/sessions?q= (search every title and key)", search, None),
        Row("GET /api/runs, first page (no runs)", runs, FIRST_PAGE_TARGET_MS),
    ]


async def first_paint(url: str, rounds: int = PAINT_ROUNDS) -> Row:
    """The web UI in Chromium, served by `agentcron serve` in its own process, the token in its
    link: the median milliseconds from the navigation's start to the first chat painted in the
    list (the page's own clock: `performance.now()` when the list first holds a chat), each
    round a fresh context (no cache).
    """
    from playwright.async_api import async_playwright

    from bench.bench_engine import free_port, serve_command, serve_env, stop_server, wait_ready

    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        proc = await asyncio.create_subprocess_exec(
            *serve_command(port, url),
            env=serve_env(home, TOKEN),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        spent: list[float] = []
        try:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, trust_env=False) as client:
                await wait_ready(client, proc, 60)
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
                )
                for _ in range(rounds + 1):  # the first round warms the server: not counted
                    context = await browser.new_context()
                    page = await context.new_page()
                    await page.add_init_script(
                        """new MutationObserver((_, seen) => {
                          if (document.querySelector('#session-list li')) {
                            window.__firstChat = performance.now(); seen.disconnect();
                          }
                        }).observe(document, {childList: true, subtree: true});"""
                    )
                    await page.goto(f"{base}/#token={TOKEN}")
                    await page.wait_for_selector("#session-list li", timeout=30_000)
                    spent.append(await page.evaluate("window.__firstChat"))
                    await context.close()
                await browser.close()
        finally:
            await stop_server(proc)
    return Row(
        "web UI: first chat painted in the list, Chromium", statistics.median(spent[1:]),
        FIRST_PAINT_TARGET_MS,
    )  # fmt: skip


def table(rows: list[Row], count: int, backend: str) -> str:
    lines = [
        f"{count:,} sessions on {backend}; the API rows: the median of the calls through an "
        "in-process ASGI client; the web UI row: `agentcron serve` in its own process",
        "",
        "| metric | measured | target | result |",
        "| --- | ---: | ---: | --- |",
    ]
    for row in rows:
        target = "-" if row.target_ms is None else f"<= {row.target_ms:.0f} ms"
        lines.append(f"| {row.metric} | {row.measured_ms:.1f} ms | {target} | {row.result} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--db", help="an empty database's URL (default: a new SQLite file)")
    parser.add_argument(
        "--no-browser", action="store_true", help="skip the web UI's first paint in Chromium"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or sqlite_url(Path(tmp) / "lists.db")
        asyncio.run(build(url, args.sessions))
        rows = asyncio.run(measure(url, args.repeat))
        if not args.no_browser:
            rows.append(asyncio.run(first_paint(url)))
    print(table(rows, args.sessions, sa.make_url(url).get_backend_name()))
    return 0 if all(r.result != "FAIL" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
