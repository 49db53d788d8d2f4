"""/ui, /docs and /redoc over the app: what is open without a key, what is not, and that the
pages name no host but their own."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx
import pytest

from app.ui.assets import DOCS_FILES, EXPLORER_DIR, explorer_assets
from tests.support.engines import ClientFactory

KEY = {"Authorization": "Bearer ui-key"}


class _Links(HTMLParser):
    """Every src and href of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in {"src", "href"} and value]


def links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.found


def elsewhere(url: str) -> bool:
    return bool(re.match(r"^([a-z][a-z0-9+.-]*:)?//", url, re.I))


async def test_the_explorer_is_public_static_content(make_client: ClientFactory) -> None:
    async with make_client(api_keys="ui-key") as client:
        page = await client.get("/ui")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy and "default-src 'none'" in policy
        for name, asset in explorer_assets().items():
            if name == "index.html":
                continue
            response = await client.get(f"/ui/{name}")
            assert response.status_code == 200, name
            assert response.content == asset.path.read_bytes()
        assert (await client.get("/ui/js/main.js")).headers["content-type"] == "text/javascript; charset=utf-8"
        # The API stays behind the key.
        assert (await client.post("/v1/list", json={"limit": 1})).status_code == 401


async def test_only_the_explorer_files_are_open(make_client: ClientFactory) -> None:
    async with make_client(api_keys="ui-key") as client:
        for path in ("/ui/nothing.js", "/ui/../openapi.json", "/ui/js", "/ui/index.html"):
            assert (await client.get(path)).status_code == 401, path
        missing = await client.get("/ui/nothing.js", headers=KEY)
        assert missing.status_code == 404
        assert missing.json()["code"] == "not_found"
        assert (await client.get("/ui/index.html", headers=KEY)).status_code == 404  # the page is /ui itself
        assert (await client.post("/ui")).status_code == 401


async def test_a_trailing_slash_leads_to_the_page(make_client: ClientFactory) -> None:
    async with make_client(api_keys="ui-key") as client:
        response = await client.get("/ui/")
        assert response.status_code == 307
        assert httpx.URL("http://engram.test/ui/").join(response.headers["location"]).path == "/ui"


async def test_a_reload_revalidates_with_the_etag(make_client: ClientFactory) -> None:
    async with make_client() as client:
        first = await client.get("/ui/style.css")
        assert first.headers["cache-control"] == "no-cache"
        again = await client.get("/ui/style.css", headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and not again.content


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_the_api_docs_are_behind_the_key_and_load_nothing_from_elsewhere(
    make_client: ClientFactory, path: str
) -> None:
    async with make_client(api_keys="ui-key") as client:
        assert (await client.get(path)).status_code == 401
        page = await client.get(path, headers=KEY)
        assert page.status_code == 200
        found = links(page.text)
        assert found and not [url for url in found if elsewhere(url)]
        assert not re.search(r"https?://", page.text), "a host named in the page"
        for url in found:
            asset = await client.get(url)  # public: the same bundles for every deployment
            assert asset.status_code == 200, url
            assert len(asset.content) > 1000


async def test_the_docs_bundles_are_all_served(make_client: ClientFactory) -> None:
    async with make_client(api_keys="ui-key") as client:
        for name in DOCS_FILES:
            assert (await client.get(f"/docs/assets/{name}")).status_code == 200
        assert (await client.get("/docs/assets/other.js", headers=KEY)).status_code == 404


def test_the_explorer_files_name_no_other_host_and_build_no_markup() -> None:
    """Everything the page loads is its own; and item text only ever becomes text nodes."""
    for path in EXPLORER_DIR.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text()
        text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, never fetched
        assert not re.search(r"https?://|//[a-z0-9-]+\.[a-z]", text, re.I), path.name
        if path.suffix == ".js":
            assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", text), path.name


def test_the_explorer_is_small() -> None:
    """Loads fast: every file the page loads, together, in a few tens of kilobytes, unminified."""
    total = sum(asset.path.stat().st_size for asset in explorer_assets().values())
    assert total < 120_000, total


async def test_the_routes_stay_out_of_the_openapi_document(make_client: ClientFactory) -> None:
    async with make_client() as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
        assert not [p for p in paths if p.startswith(("/ui", "/docs", "/redoc"))]
