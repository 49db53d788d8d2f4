"""What a run's services are started with: the bench's own settings, and the ones a run adds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import __main__ as bench_main
from bench import server


@pytest.fixture
def given(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    settings: dict[str, str] = {}
    monkeypatch.setattr(server, "SERVICE_SETTINGS", settings)
    return settings


def test_a_service_runs_on_its_defaults_but_for_what_the_bench_decides(
    given: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_LATE_INTERACTION", "false")  # the shell's own settings never reach it
    env = server.engram_env("postgresql://db/engram", Path("/tmp/data"), "bge-small")
    assert "ENGRAM_LATE_INTERACTION" not in env
    assert env["ENGRAM_EMBEDDER"] == "bge-small" and env["ENGRAM_DATABASE_URL"] == "postgresql://db/engram"
    assert server.service_settings("bge-small").late_interaction_on is True
    assert server.service_settings("wordllama").late_interaction_on is False


def test_service_env_adds_a_setting_to_every_service_and_to_what_the_bench_reads(
    given: dict[str, str], tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError, match="no runs"):  # parsed, then nothing to report in an empty folder
        bench_main.main(["--service-env", "ENGRAM_LATE_INTERACTION=false", "--report-only", "--out", str(tmp_path)])
    assert given == {"ENGRAM_LATE_INTERACTION": "false"}
    env = server.engram_env("postgresql://db/engram", Path("/tmp/data"), "bge-small")
    assert env["ENGRAM_LATE_INTERACTION"] == "false"
    assert server.service_settings("bge-small").late_interaction_on is False


@pytest.mark.parametrize("given_setting", ["ENGRAM_EMBEDDER=minilm", "ENGRAM_DATABASE_URL=x", "LATE=true", "ENGRAM_X"])
def test_service_env_refuses_what_the_bench_decides_and_what_is_not_a_setting(
    given: dict[str, str], given_setting: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_main.main(["--service-env", given_setting, "--report-only"])
    assert exit_.value.code == 2 and given == {}


def test_the_runs_embedded_server_takes_the_shared_buffers_a_run_gives_its_services(
    given: dict[str, str], tmp_path: Path
) -> None:
    given["ENGRAM_EMBEDDED_SHARED_BUFFERS"] = "144MB"  # the bench starts the server the service would have started
    with server.embedded_postgres(tmp_path / "pg") as database:
        assert database.setting("shared_buffers") == "144MB"
