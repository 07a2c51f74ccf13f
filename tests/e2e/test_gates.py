"""A job's gate in a real browser: the automation's detail says the gate in words, and its run
history shows a fire the gate held back (nothing to do, what the gate said) apart from one it
let through.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.e2e.conftest import StartServer, log_in, new_chat
from tests.e2e.test_history import add_automation

pytestmark = pytest.mark.e2e


class _Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the path is the status to answer
        status = int(self.path.strip("/"))
        body = b"2 new orders" if status == 200 else b"no new orders"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def checks() -> Iterator[str]:
    """A local HTTP server for the gate to ask: `/404` (nothing to do), `/200` (run)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.timeout(60)
async def test_the_detail_says_the_gate_and_the_history_shows_what_it_held(
    start_server: StartServer, page: Page, checks: str
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    item = await add_automation(page, "orders", "sum up the new orders", "every day at 9")
    (job,) = await ui.cron.jobs.list(session_key=key)
    headers = {"Authorization": f"Bearer {ui.token}"}
    async with httpx.AsyncClient(base_url=ui.url, headers=headers) as api:

        async def gate_and_run(status: int, **kw: Any) -> dict[str, Any]:
            gate = {"kind": "http", "target": f"{checks}/{status}", "timeout_s": 5} | kw
            patched = await api.patch(f"api/jobs/{job.id}", json={"gate": gate})
            assert patched.status_code == 200, patched.text
            run = (await api.post(f"api/jobs/{job.id}/run")).json()
            done = await api.get(f"api/runs/{run['id']}", params={"wait": 20}, timeout=30)
            return done.json()  # type: ignore[no-any-return]

        skipped = await gate_and_run(404, notice=True)
        assert skipped["state"] == "skipped"
        succeeded = await gate_and_run(200)
        assert succeeded["state"] == "succeeded"
        ids = (skipped["id"], succeeded["id"])

    await expect(item.locator(".last-run")).to_contain_text("succeeded")
    await item.get_by_role("button", name="Details of orders").click()
    dialog = page.get_by_role("dialog", name="orders")
    policy = dialog.locator("ul.policy")
    await expect(policy).to_contain_text(
        f"Before each fire its gate sends a GET to {checks}/200 (2xx runs the fire; "
        "204, 304, 404, 409, 412, 423 skip it), within 5 s."
    )
    rows = dialog.locator(".job-runs tr.run")
    await expect(rows).to_have_count(2)
    held, ran = (dialog.locator(f".job-runs tr.run[data-id='{r}']") for r in ids)
    await expect(held.locator(".gate-verdict")).to_have_text("Held by its gate: nothing to do")
    await expect(held.locator(".gate-verdict")).to_have_attribute(
        "title", "The gate said: no new orders"
    )
    await expect(held.locator(".state-badge")).to_have_text("skipped")
    await expect(held.locator("td.delivery")).to_have_text("—")
    await expect(ran.locator(".gate-verdict")).to_have_text("Its gate let it run")
    await expect(ran.locator("td.delivery")).to_have_text("in the chat")
    # A gate that is the whole job says so.
    await page.locator("#job-close").click()
    only = {"kind": "http", "target": f"{checks}/200", "no_llm": True}
    async with httpx.AsyncClient(base_url=ui.url, headers=headers) as api:
        assert (await api.patch(f"api/jobs/{job.id}", json={"gate": only})).status_code == 200
    await item.get_by_role("button", name="Details of orders").click()
    await expect(policy).to_contain_text("No LLM: the gate is the whole job.")
