"""The checks, a module per family of the contract; importing this package registers them all."""

from app.conformance.checks import envelope, requests, visibility, writes  # noqa: F401
