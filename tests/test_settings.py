"""Configuration (app/settings.py, app/cli.py): a wrong value stops the command with one line naming
its variable, never the value (it may be a secret) and never a traceback."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path

import pytest

from app.cli import access_summary, build_parser, is_loopback, main
from app.contract.errors import ConfigError
from app.contract.limits import DEFAULT_LIMITS, Limits
from app.engine.postgres.schema import async_url
from app.settings import Settings


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ENGRAM_LOG_LEVEL", "loud"),
        ("ENGRAM_API_KEYS_FILE", "/nonexistent/keys"),
        ("ENGRAM_DATABASE_URL", "SuperSecret123"),
        ("ENGRAM_DATABASE_URL", "postgresql://engram:SuperSecret123@db:abc/engram"),
        ("ENGRAM_DATABASE_URL", "mysql://engram:SuperSecret123@db/engram"),
        ("ENGRAM_READ_DATABASE_URL", "postgresql://engram:SuperSecret123@replica:abc/engram"),
        ("ENGRAM_READ_REPLICA_WAIT_MS", "-1"),
        ("ENGRAM_DATA_DIR", "/etc/hostname"),
        ("ENGRAM_EMBEDDING_DIM", "100"),
        ("ENGRAM_EMBEDDER", "other"),
        ("ENGRAM_POOL_SIZE", "-1"),
        ("ENGRAM_MAX_BODY_BYTES", "0"),
        ("ENGRAM_CONNECT_TIMEOUT_S", "-1"),
        ("ENGRAM_HNSW_EF_SEARCH", "0"),
        ("ENGRAM_HNSW_EF_SEARCH_FILTERED", "5000"),
        ("ENGRAM_HNSW_ITERATIVE_SCAN", "sideways"),
        ("ENGRAM_CUSTOM_PLAN_IO_CONCURRENCY", "1001"),
        ("ENGRAM_API_KEYS", "clé-SuperSecret123"),  # a header could never carry it
    ],
)
def test_a_wrong_setting_is_one_line_naming_its_variable(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["migrate"]) == 2
    out = capsys.readouterr()
    [line] = out.err.splitlines()
    assert line.startswith("engram: configuration error: ") and variable in line
    assert "SuperSecret123" not in out.err + out.out and "Traceback" not in out.err


@pytest.mark.parametrize("value", ["", " ", " , ,", "# a comment only"])
def test_a_key_list_that_names_no_key_stops_the_start(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Set but empty (a variable that expanded to nothing) fails closed instead of opening every route."""
    if value.startswith("#"):
        keys = tmp_path / "keys"
        keys.write_text(value + "\n\n")
        monkeypatch.setenv("ENGRAM_API_KEYS_FILE", str(keys))
    else:
        monkeypatch.setenv("ENGRAM_API_KEYS", value)
    assert main(["serve", "--port", "0"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("engram: configuration error: ENGRAM_API_KEYS(_FILE) is set but holds no key")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "engram.example"])
def test_serving_beyond_loopback_without_a_key_is_refused(host: str) -> None:
    args = build_parser().parse_args(["serve", "--host", host])
    with pytest.raises(ConfigError, match=f"{re.escape(host)} is reachable beyond this machine and no API key"):
        access_summary(Settings(), args, held=False)
    opened = build_parser().parse_args(["serve", "--host", host, "--allow-open-access"])
    assert access_summary(Settings(), opened, held=False).startswith(
        f"none: every route is open to anyone who reaches {host}"
    )
    assert access_summary(Settings(allow_open_access=True), args, held=False).startswith(
        "none: every route is open to anyone"
    )
    assert access_summary(Settings(api_keys="k1,k2"), args, held=False) == "2 configured"
    assert access_summary(Settings(), args, held=True) == "keys held in the database (engram keys list)"
    local = build_parser().parse_args(["serve"])
    assert access_summary(Settings(), local, held=False).startswith("none: every route is open to this machine")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("localhost.example", False),
    ],
)
def test_loopback_is_an_address_only_this_machine_reaches(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_port_is_0_to_65535(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--port", "99999"])
    assert stopped.value.code == 2 and "99999 is not a port" in capsys.readouterr().err


def test_what_a_shell_or_a_hosted_provider_writes_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", "~/engram-data")
    monkeypatch.setenv("ENGRAM_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("ENGRAM_DATABASE_URL", "")  # empty is unset: the embedded server
    monkeypatch.setenv("ENGRAM_READ_DATABASE_URL", " ")  # and no replica
    settings = Settings()
    assert settings.data_dir == Path.home() / "engram-data"
    assert settings.log_level == "debug" and settings.database_url is None and settings.read_database_url is None
    assert async_url("postgres://u:p@h:5432/d?sslmode=require") == "postgresql+asyncpg://u:p@h:5432/d?ssl=require"
    assert async_url("postgresql://u:p@h/d?sslmode=disable&ssl=require") == "postgresql+asyncpg://u:p@h/d?ssl=require"


SECRET_URL = "http://engram:SuperSecret123@localhost:11434/v1"


@pytest.mark.parametrize(
    ("missing", "url", "model", "dim"),
    [
        ("ENGRAM_EMBEDDING_URL", "", "nomic-embed-text", "768"),
        ("ENGRAM_EMBEDDING_URL", "engram:SuperSecret123@localhost:11434/v1", "nomic-embed-text", "768"),
        ("ENGRAM_EMBEDDING_MODEL", SECRET_URL, "", "768"),
        ("ENGRAM_EMBEDDING_DIM", SECRET_URL, "nomic-embed-text", ""),
    ],
)
def test_the_openai_embedder_needs_an_http_url_a_model_and_a_dimension(
    missing: str, url: str, model: str, dim: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDDER", "openai")
    monkeypatch.setenv("ENGRAM_EMBEDDING_KEY", "sk-SuperSecret123")
    for variable, value in {"URL": url, "MODEL": model, "DIM": dim}.items():
        if value:
            monkeypatch.setenv(f"ENGRAM_EMBEDDING_{variable}", value)
    assert main(["migrate"]) == 2
    out = capsys.readouterr()
    [line] = out.err.splitlines()
    assert line.startswith("engram: configuration error: ") and missing in line
    assert "SuperSecret123" not in out.err + out.out and "Traceback" not in out.err


@pytest.mark.parametrize(
    ("named", "url", "model"),
    [
        ("ENGRAM_ANSWER_URL", "engram:SuperSecret123@localhost:11434/v1", "llama3.2"),
        ("ENGRAM_ANSWER_URL", "ftp://engram:SuperSecret123@localhost/v1", "llama3.2"),
        ("ENGRAM_ANSWER_MODEL", SECRET_URL, ""),
        ("ENGRAM_ANSWER_MODEL", SECRET_URL, "  "),
    ],
)
def test_a_recall_answer_model_needs_an_http_url_and_a_model(
    named: str, url: str, model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENGRAM_ANSWER_URL", url)
    monkeypatch.setenv("ENGRAM_ANSWER_MODEL", model)
    monkeypatch.setenv("ENGRAM_ANSWER_KEY", "sk-SuperSecret123")
    assert main(["migrate"]) == 2
    out = capsys.readouterr()
    [line] = out.err.splitlines()
    assert line.startswith("engram: configuration error: ") and named in line
    assert "SuperSecret123" not in out.err + out.out and "Traceback" not in out.err


def test_every_limit_is_a_setting_with_the_contracts_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for limit in fields(Limits):
        monkeypatch.delenv(f"ENGRAM_{limit.name.upper()}", raising=False)
    assert Settings().limits == DEFAULT_LIMITS
    monkeypatch.setenv("ENGRAM_MAX_TAGS", "3")
    assert Settings().limits == replace(DEFAULT_LIMITS, max_tags=3)


def test_read_ahead_of_the_pool_that_plans_per_value_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGRAM_CUSTOM_PLAN_IO_CONCURRENCY", raising=False)
    assert Settings().engine_options.pool.custom_plan_io_concurrency == 0
    monkeypatch.setenv("ENGRAM_CUSTOM_PLAN_IO_CONCURRENCY", "16")
    assert Settings().engine_options.pool.custom_plan_io_concurrency == 16
