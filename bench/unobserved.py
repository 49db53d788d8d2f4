"""``python -m bench.unobserved serve ...``: ``engram serve`` without its Observer middleware.

No request is counted, timed or logged (app/api/observer.py): the baseline against which the
load harness (bench/load.py) measures what the metrics and the access line cost a request.
For measurement only; the service itself always runs with the Observer.
"""

from __future__ import annotations

import sys
from typing import Any

import app.main
from app.api.observer import Observer
from app.cli import main

_made_with_observer = app.main.create_app


def create_app_unobserved(*args: Any, **kwargs: Any) -> Any:
    """The app as ``create_app`` makes it, less the Observer (the middleware stack is built at the first request)."""
    made = _made_with_observer(*args, **kwargs)
    made.user_middleware = [m for m in made.user_middleware if m.cls is not Observer]
    return made


if __name__ == "__main__":
    app.main.create_app = create_app_unobserved  # read by ``engram serve`` when it starts
    sys.exit(main())
