"""The checks, a module per family of the contract; importing this package registers them all."""

from app.conformance.checks import (  # noqa: F401
    cursors,
    envelope,
    explore,
    filters,
    ranking,
    recall,
    requests,
    visibility,
    writes,
)
