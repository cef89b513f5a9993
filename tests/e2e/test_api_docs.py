"""The browsable API reference at /api/docs and the favicon, in Chromium: Swagger UI
renders every operation of the server's OpenAPI document from this server's own files,
under the site's unchanged content security policy, and no request leaves the server."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page, Route

from core.api import openapi_document

pytestmark = pytest.mark.e2e

# Records every CSP violation the page reports, from before any of its scripts runs.
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


class Watched:
    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.urls: list[str] = []
        self.errors: list[str] = []

    async def route(self, route: Route) -> None:
        url = route.request.url
        self.urls.append(url)
        if url.startswith(f"{self.origin}/") or url.startswith(("data:", "blob:")):
            await route.continue_()
        else:
            await route.abort()

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)


@pytest.fixture(params=[(1280, 800), (390, 844)], ids=["desktop", "phone"])
async def docs_context(request: pytest.FixtureRequest, browser: Browser) -> AsyncIterator[BrowserContext]:
    width, height = request.param
    context = await browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
    try:
        yield context
    finally:
        await context.close()


async def watched_page(context: BrowserContext, origin: str) -> tuple[Page, Watched]:
    watched = Watched(origin)
    await context.route("**/*", watched.route)
    await context.add_init_script(CSP_LISTENER)
    page = await context.new_page()
    page.on("console", watched.console)
    page.on("pageerror", lambda error: watched.errors.append(str(error)))
    return page, watched


def _csp_shape(header: str) -> str:
    return re.sub(r"'nonce-[^']+'", "'nonce-…'", header)


async def test_api_docs_lists_every_operation_from_this_server_only(
    human_origin: str, docs_context: BrowserContext
) -> None:
    page, watched = await watched_page(docs_context, human_origin)
    response = await page.goto(f"{human_origin}/api/docs")
    assert response is not None and response.status == 200
    await page.get_by_role("heading", name=re.compile("RAM API")).wait_for()

    # Every operation of the document is listed, with its method and path.
    document = openapi_document()
    expected = sorted((method.upper(), path) for path, item in document["paths"].items() for method in item)
    blocks = page.locator("#swagger-ui .opblock-tag-section .opblock")
    await blocks.first.wait_for()
    shown = sorted(
        zip(
            [m.strip() for m in await blocks.locator(".opblock-summary-method").all_inner_texts()],
            [p.strip().replace("\u200b", "") for p in await blocks.locator(".opblock-summary-path").all_inner_texts()],
            strict=True,
        )
    )
    assert shown == expected

    # A click opens one: its parameters and responses, as the document gives them.
    create = page.locator("#swagger-ui .opblock-post").filter(
        has=page.locator(".opblock-summary-path", has_text=re.compile(r"^/api/runs$"))
    )
    await create.first.locator(".opblock-summary-control").click()
    await create.first.locator(".responses-wrapper").wait_for()
    statuses = await create.first.locator(".responses-table .response-col_status").all_inner_texts()
    assert {"201", "400", "401"} <= {s.strip() for s in statuses}, statuses

    # The same policy as every other page (its own nonce): nothing loosened, nothing violated.
    home = await page.request.get(f"{human_origin}/accounts/login/")
    assert _csp_shape(response.headers["content-security-policy"]) == _csp_shape(
        home.headers["content-security-policy"]
    )
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert await page.evaluate("window.__cspViolations") == []
    assert watched.errors == []
    assert watched.urls and all(url.startswith(f"{human_origin}/") for url in watched.urls), watched.urls
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in url for url in watched.urls)


async def test_favicon_is_linked_from_pages_and_served_at_the_default_path(
    human_origin: str, docs_context: BrowserContext
) -> None:
    page, watched = await watched_page(docs_context, human_origin)
    await page.goto(f"{human_origin}/accounts/login/")
    icon = await page.locator("link[rel=icon]").get_attribute("href")
    assert icon == "/static/ram/favicon.svg"
    for path, content_type in ((icon, "image/svg+xml"), ("/favicon.ico", "image/x-icon")):
        response = await page.request.get(f"{human_origin}{path}")
        assert response.status == 200, path
        assert response.headers["content-type"] == content_type
        assert len(await response.body()) > 100
    # The admin's pages name no icon: Chromium's own request for /favicon.ico is answered.
    await page.goto(f"{human_origin}/admin/login/")
    assert await page.locator("link[rel=icon]").count() == 0
    assert watched.errors == []
