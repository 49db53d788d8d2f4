"""``GET /metrics``: the service's Prometheus metrics (docs/operations.md).

Behind the perimeter like every route, and for an admin key that reaches every namespace only:
the counts are the whole service's, across every namespace. ENGRAM_METRICS_PUBLIC opens it to
whoever reaches the port (a scraper on a private network). Left out of the OpenAPI document:
it is for operators, not for the clients generated from it.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.contract.access import Access
from app.contract.errors import Forbidden
from app.telemetry.scrape import CONTENT_TYPE, exposition

PATH = "/metrics"

router = APIRouter()


@router.get(PATH, include_in_schema=False)
async def metrics(request: Request) -> Response:
    access: Access | None = request.scope.get("state", {}).get("access")
    # None: the route is public, so the perimeter asked for no key.
    if access is not None and (access.is_scoped or not access.allows("admin")):
        raise Forbidden("reading metrics needs an admin key that reaches every namespace")
    return Response(await exposition(request.app.state.engine), media_type=CONTENT_TYPE)
