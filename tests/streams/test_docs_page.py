"""The interactive API docs (``/docs``) in a real browser with no network but this server:
Debian's chromium, driven by Playwright, renders Swagger UI and every operation of the API.
No broker is needed: the page and the document are the service's own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from browser import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from fakes import unit_settings
from harness import wait_for
from playwright.sync_api import Route, expect, sync_playwright
from tenants import KEYS

from memstream.streams.api.app import create_api
from memstream.streams.api.auth import KeyFile
from memstream.streams.api.server import api_server
from memstream.streams.kafka.broker import free_port
from memstream.streams.service.app import Service

pytestmark = needs_chromium("the docs page's browser test")


@pytest.fixture
def root(tmp_path: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of the HTTP API, served by uvicorn in a thread."""
    settings = unit_settings(tmp_path)
    port = free_port()
    api = create_api(Service.from_settings(settings), KeyFile.of(KEYS))
    server = api_server(api, settings, host="127.0.0.1", port=port, own_signals=False)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, "the API server to start", timeout_s=30)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_swagger_ui_renders_every_operation_with_no_network_but_this_server(root: str) -> None:
    ours = urlsplit(root).netloc
    elsewhere: list[str] = []

    def only_ours(route: Route) -> None:
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    document_paths = 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", only_ours)
            page.goto(f"{root}/docs")
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("memstream")
            expect(page.locator(".opblock-summary-path", has_text="/v1/memories/search")).to_be_visible()
            document_paths = page.locator(".opblock").count()
        finally:
            browser.close()
    assert elsewhere == []
    # Every operation of the document is on the page (17 under /v1 today).
    assert document_paths >= 17
