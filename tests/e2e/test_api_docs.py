"""/docs in a real browser with no network beyond the server: Swagger UI renders the API."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.async_api import Page, Route, expect

from tests.e2e.conftest import StartServer

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(30)
async def test_the_api_docs_render_offline(start_server: StartServer, page: Page) -> None:
    ui = await start_server()
    ours = urlsplit(ui.url).netloc
    elsewhere: list[str] = []

    async def offline(route: Route) -> None:
        if urlsplit(route.request.url).netloc == ours:
            await route.continue_()
        else:  # a CDN: as if there were no network
            elsewhere.append(route.request.url)
            await route.abort()

    await page.route("**/*", offline)
    await page.goto(f"{ui.url}docs")
    await expect(page.locator(".swagger-ui .info .title")).to_contain_text("agentcron")
    await expect(page.locator(".opblock-summary-path").first).to_be_visible()
    assert elsewhere == []
