"""The chat list in a real browser: read a page at a time as it is scrolled, searched on the
server, a linked chat opened even when it is not on the first page.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from playwright.async_api import Page, expect

from tests.e2e.conftest import StartServer, Ui, log_in

pytestmark = pytest.mark.e2e

CHATS = 120  # two pages and a part (the UI reads 50 at a time)


async def make_chats(ui: Ui) -> None:
    for i in range(CHATS):
        await ui.cron.sessions.create(f"api:chat-{i:03d}", title=f"Chat {i:03d}")


@pytest.mark.timeout(60)
async def test_the_chat_list_reads_a_page_at_a_time_as_it_is_scrolled(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await make_chats(ui)
    await log_in(page, ui)
    chats = page.locator("#session-list .session-title")
    await expect(chats).to_have_count(50)  # the first page only
    await expect(chats.first).to_have_text("Chat 119")  # the newest first
    more = page.locator("#session-more")
    await expect(more).to_be_visible()
    nav = page.locator("nav.session-nav")
    await nav.evaluate("n => { n.scrollTop = n.scrollHeight; }")
    await expect(chats).to_have_count(100)
    await nav.evaluate("n => { n.scrollTop = n.scrollHeight; }")
    await expect(chats).to_have_count(CHATS)
    await expect(more).to_be_hidden()
    titles = await chats.all_text_contents()
    assert titles == [f"Chat {i:03d}" for i in reversed(range(CHATS))]  # each once, in order


@pytest.mark.timeout(60)
async def test_the_search_asks_the_server_by_title_or_key(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await make_chats(ui)
    await log_in(page, ui)
    chats = page.locator("#session-list .session-title")
    search = page.get_by_role("searchbox", name="Search chats by title or key")
    await search.fill("CHAT 11")  # titles, any case; past the first page too
    await expect(chats).to_have_text([f"Chat {i:03d}" for i in range(119, 109, -1)])
    await search.fill("api:chat-007")  # a key
    await expect(chats).to_have_text(["Chat 007"])
    await search.fill("no such chat")
    await expect(chats).to_have_count(0)
    await expect(page.locator("#session-empty")).to_have_text(
        "No chat's title or key holds “no such chat”."
    )
    await search.fill("")
    await expect(chats).to_have_count(50)


@pytest.mark.timeout(60)
async def test_a_linked_chat_opens_though_it_is_not_on_the_first_page(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await make_chats(ui)
    await log_in(page, ui, f"#session={quote('api:chat-000')}")
    await expect(page.locator("#chat-key")).to_have_text("api:chat-000")
    current = page.locator("#session-list .session.current .session-title")
    await expect(current).to_have_text("Chat 000")
    # A change read again from the first page keeps the open chat in the list.
    await ui.cron.sessions.send("api:chat-new", "hello")
    await expect(page.locator("#session-list .session-title").first).to_have_text("hello")
    await expect(current).to_have_text("Chat 000")
