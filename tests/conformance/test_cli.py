"""``engram conformance URL`` as its users run it: against a live ``engram serve``, and against a
broken service, which it must fail."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
from collections.abc import Iterator

import pytest
import uvicorn

from app.conformance.runner import selected
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from app.main import create_app
from app.settings import Settings
from tests.conformance.middleware import Answer, rewriting
from tests.conformance.support import PENDING
from tests.support.live import live_server
from tests.support.processes import ENGRAM, engram_env, free_port
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed( \(\d+ known\))?$")
KEY = "conformance-key"


def conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENGRAM, "conformance", *args], env=engram_env(), capture_output=True, text=True, timeout=300, check=False
    )


def test_a_live_engram_serve_conforms() -> None:
    checks = [c.family + "/" + c.name for c in selected()]
    with scratch("conformance") as tmp, live_server(tmp, api_key=KEY) as server:
        known = ["--known-failures", ",".join(PENDING)] if PENDING else []
        run = conformance(server.base_url, "--key", KEY, *known)
        as_json = conformance(server.base_url, "--key", KEY, "--json")
        unkeyed = conformance(server.base_url, "--families", "envelope")
    assert run.returncode == 0, run.stdout + run.stderr
    *lines, summary = run.stdout.splitlines()
    assert [line.split()[1].rstrip(":") for line in lines] == checks
    assert SUMMARY.match(summary), summary
    assert sorted(line.split()[1].rstrip(":") for line in lines if line.startswith("FAIL")) == sorted(PENDING)

    document = json.loads(as_json.stdout)
    assert [f"{c['family']}/{c['name']}" for c in document["checks"]] == checks
    assert document["passed"] + document["failed"] == len(checks)
    assert as_json.returncode == (1 if PENDING else 0)
    # Without the key the service refuses every call, and each check says so.
    assert unkeyed.returncode == 1 and "401" in unkeyed.stdout


def _catalogue_without_conflict(answer: Answer) -> None:
    if answer.path == "/v1/errors":
        answer.json = {"errors": [e for e in answer.json["errors"] if e["code"] != "conflict"]}


@contextlib.contextmanager
def serving(embedder: WordLlamaEmbedder) -> Iterator[str]:
    """The app on the reference engine, its catalogue short of one code, on a loopback port of a thread."""

    async def given(_: Settings) -> ReferenceEngine:
        return ReferenceEngine(embedder)

    app = rewriting(_catalogue_without_conflict)(create_app(Settings(), engine_factory=given))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.05)
            assert thread.is_alive(), "the broken service did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


def test_a_broken_service_fails(embedder: WordLlamaEmbedder) -> None:
    with serving(embedder) as url:
        run = conformance(url, "--families", "envelope")
        known = conformance(url, "--families", "envelope", "--known-failures", "envelope/no_such_check")
    assert run.returncode == 1
    assert "FAIL  envelope/error_catalogue_lists_the_contract_codes: /v1/errors lists" in run.stdout
    assert SUMMARY.match(run.stdout.splitlines()[-1])
    assert known.returncode == 1
    assert "stale  envelope/no_such_check is a known failure but no such check ran" in known.stdout
