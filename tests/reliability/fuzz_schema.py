"""The committed OpenAPI document plus the links Schemathesis follows in its stateful phase.

Our ids travel in request bodies, not paths, so Schemathesis cannot infer how
operations connect; these links say it: a stored item's id feeds ``get``,
``forget`` and ``forget_within`` (store → get → forget). Used by ``.ci/run``:

    python tests/reliability/fuzz_schema.py openapi.json > linked.json
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _link(target: str, expression: str, **extra: Any) -> dict[str, Any]:
    return {"operationId": target, "requestBody": {"ids": [expression], **extra}}


def with_links(document: dict[str, Any]) -> dict[str, Any]:
    stored = "$response.body#/id"
    first = "$response.body#/receipts/0/id"
    store_links = {
        "GetStored": _link("get", stored),
        "ForgetStored": _link("forget", stored),
        "ForgetStoredWithin": _link("forget_within", stored, reach={"at": "root"}),
    }
    paths = document["paths"]
    for status in ("200", "201"):
        paths["/v1/store"]["post"]["responses"][status]["links"] = store_links
    paths["/v1/store_many"]["post"]["responses"]["200"]["links"] = {
        "GetFirstStored": _link("get", first),
        "ForgetFirstStored": _link("forget", first),
    }
    return document


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as handle:
        document = json.load(handle)
    json.dump(with_links(document), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
