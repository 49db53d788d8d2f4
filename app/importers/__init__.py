"""Importers from other memory stores: each reads its source and yields NDJSON item lines, which
``engram import`` stores as it stores an export (app/engine/transfer.py): idempotent, bad
records reported by number. The mappings are documented in docs/lifecycle.md#importers."""
