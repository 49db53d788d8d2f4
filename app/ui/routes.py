"""``/ui`` (the explorer), ``/docs`` and ``/redoc`` (the API docs), all self-hosted.

The explorer's files are public static content, opened in the perimeter path by path; every API
call the page makes carries the key its user typed. ``/docs`` and ``/redoc`` stay behind the
perimeter like ``/openapi.json`` they read (docs/api.md); only their script and style bundles
are public, being the same for every deployment.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.responses import RedirectResponse, Response

from app.contract.errors import NotFound, quoted
from app.ui.assets import Asset, docs_assets, explorer_assets

UI_PATH = "/ui"
DOCS_ASSETS = "/docs/assets"
DOCS_TITLE = "Engram API"
OPENAPI_PATH = "/openapi.json"  # app/main.py serves it
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def _offline(page: HTMLResponse) -> HTMLResponse:
    """The page, allowed to load only from this service: the bundles reach for a few things
    elsewhere (ReDoc's logo), which the browser then refuses without asking the network."""
    inline = [m.group(1).encode() for m in _INLINE_SCRIPT.finditer(bytes(page.body).decode())]
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'" for script in inline)
    page.headers["Content-Security-Policy"] = (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    return page


def _file(files: dict[str, Asset], name: str, request: Request, what: str) -> Response:
    """The file ``name`` of ``files``; a ``not_found`` envelope names the ``what`` when there is none."""
    if name not in files:
        raise NotFound(f"no {what} file {quoted(name)}")
    return files[name].response(request)


def mount(app: FastAPI) -> frozenset[tuple[str, str]]:
    """Add the routes; answer the ``(method, path)`` pairs the perimeter must leave open."""
    explorer = explorer_assets()
    index = explorer.pop("index.html")
    docs = docs_assets()

    @app.get(UI_PATH, include_in_schema=False)
    async def explorer_page(request: Request) -> Response:
        return index.response(request)

    @app.get(UI_PATH + "/{name:path}", include_in_schema=False)
    async def explorer_file(name: str, request: Request) -> Response:
        if not name:  # "/ui/": the page's relative links are written for "/ui"
            return RedirectResponse("../ui", status_code=307)
        return _file(explorer, name, request, "explorer")

    @app.get(DOCS_ASSETS + "/{name}", include_in_schema=False)
    async def docs_file(name: str, request: Request) -> Response:
        return _file(docs, name, request, "docs")

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=OPENAPI_PATH,
            title=DOCS_TITLE,
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            # No badge from the public validator service: nothing leaves the machine.
            swagger_ui_parameters={"validatorUrl": None},
        )
        return _offline(page)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        page = get_redoc_html(
            openapi_url=OPENAPI_PATH,
            title=DOCS_TITLE,
            redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )
        return _offline(page)

    opened = {UI_PATH, UI_PATH + "/"} | {f"{UI_PATH}/{name}" for name in explorer}
    opened |= {f"{DOCS_ASSETS}/{name}" for name in docs}
    return frozenset(("GET", path) for path in opened)
