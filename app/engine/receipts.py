"""Forget receipts: what ``POST /v1/restore`` takes back within the undo window."""

from __future__ import annotations

import secrets


def new_receipt() -> str:
    return "fgt_" + secrets.token_hex(12)
