"""Files served as they are from the installed package: the explorer's, and the API docs' bundles.

Every file is known when the app is made, so the perimeter opens exactly these paths and nothing
else under them, and a wheel missing one fails :func:`verify` instead of a browser.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import fastapi_offline
from starlette.requests import Request
from starlette.responses import Response

EXPLORER_DIR = Path(__file__).parent / "static"
# Swagger UI and ReDoc as fastapi-offline ships them: no CDN, nothing fetched when a page loads.
DOCS_DIR = Path(fastapi_offline.__file__).parent / "static"
DOCS_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
# The explorer loads its own files and calls its own origin, nothing else: an item's text that
# holds markup cannot run script or fetch from elsewhere even if it ever reached the DOM as HTML.
EXPLORER_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class Asset:
    """One file: read once, answered with an ETag so a reload revalidates instead of downloading."""

    path: Path
    headers: dict[str, str] = field(default_factory=dict)

    @cached_property
    def body(self) -> bytes:
        return self.path.read_bytes()

    @cached_property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:32] + '"'

    def response(self, request: Request) -> Response:
        headers = {"ETag": self.etag, "Cache-Control": "no-cache", **self.headers}
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type=MEDIA_TYPES[self.path.suffix], headers=headers)


def explorer_assets() -> dict[str, Asset]:
    """Every file of the explorer by its path below ``/ui/`` (``index.html`` is ``/ui`` itself)."""
    return {
        str(path.relative_to(EXPLORER_DIR)): Asset(path, EXPLORER_HEADERS)
        for path in sorted(EXPLORER_DIR.rglob("*"))
        if path.is_file() and path.suffix in MEDIA_TYPES
    }


def docs_assets() -> dict[str, Asset]:
    return {name: Asset(DOCS_DIR / name, {"X-Content-Type-Options": "nosniff"}) for name in DOCS_FILES}


def verify() -> None:
    """Fail when the installed package lacks a file the pages load (a wheel built without package data)."""
    explorer = explorer_assets()
    missing = [name for name in ("index.html", "style.css", "js/main.js") if name not in explorer]
    missing += [str(DOCS_DIR / name) for name in DOCS_FILES if not (DOCS_DIR / name).is_file()]
    if missing:
        raise RuntimeError(f"the explorer's files are missing from the installed package: {', '.join(missing)}")
