"""docker-compose.yml and .env.example, checked without a Docker engine (there is none here).

The file is parsed as compose reads it (YAML, merge keys, ``${VAR}``
interpolation from .env), and the start-up chain, healthchecks and settings
are asserted on what compose would actually run.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices

from app.settings import Settings
from tests.support.scratch import REPO

COMPOSE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}; $$ is a literal $.
_VARIABLE = re.compile(r"\$\$|\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}")


def _env_example() -> dict[str, str]:
    """The values .env.example sets (its uncommented lines)."""
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, operator, argument = match.groups()
        present = env.get(name)
        if operator in (":?", "?"):
            if present is None or (operator == ":?" and not present):
                raise KeyError(f"{name}: {argument}")
            return present
        if operator == ":-":
            return present or argument
        if operator == "-":
            return argument if present is None else present
        return present or ""

    return _VARIABLE.sub(substitute, value)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    """The file as compose runs it with .env copied from .env.example."""
    return _interpolate(raw, _env_example())


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """What the container's environment would hold: env_file first, then ``environment`` over it."""
    env: dict[str, str] = {}
    files = service.get("env_file", [])
    for name in [files] if isinstance(files, str) else files:
        assert name == ".env", "settings come from .env, as docs/self-hosting.md says"
        env.update(_env_example())
    declared = service.get("environment", {})
    if isinstance(declared, list):
        declared = dict(item.partition("=")[::2] for item in declared)
    env.update({k: str(v) for k, v in declared.items()})
    return env


def _command(value: str | list[str]) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else list(value)


def test_the_services_and_their_start_order(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"db", "migrate", "api"}
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["api"]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert services["api"]["depends_on"]["db"] == {"condition": "service_healthy"}
    assert "depends_on" not in services["db"]


def test_db_is_pgvector_on_postgres_17_with_a_named_volume_and_pg_isready(compose: dict[str, Any]) -> None:
    db = compose["services"]["db"]
    assert db["image"] == "pgvector/pgvector:pg17"
    [volume] = db["volumes"]
    name, _, target = volume.partition(":")
    assert name in compose["volumes"], "a named volume, declared at the top level"
    assert target == "/var/lib/postgresql/data"  # where the pg17 image keeps its data
    test = db["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL" and test[1].startswith("pg_isready ")
    assert "ports" not in db, "the database is reached only over the compose network"
    env = db["environment"]
    assert env["POSTGRES_PASSWORD"] == _env_example()["POSTGRES_PASSWORD"]


def test_migrate_is_a_one_shot_engram_migrate(compose: dict[str, Any]) -> None:
    migrate = compose["services"]["migrate"]
    assert _command(migrate["command"]) == ["engram", "migrate"]
    assert migrate["restart"] == "no"
    assert "ports" not in migrate and "healthcheck" not in migrate


def test_api_publishes_its_port_and_checks_its_health(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    assert "command" not in api, "the image's CMD (engram serve --host 0.0.0.0 --port 8080) runs"
    [port] = api["ports"]
    assert port == "127.0.0.1:8080:8080"
    test = api["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    assert "http://127.0.0.1:8080/v1/health" in test[3]
    assert api["restart"] == "unless-stopped"


def test_api_is_given_time_to_finish_its_requests_when_stopped(compose: dict[str, Any]) -> None:
    grace = Settings.model_fields["shutdown_grace_s"].default
    stop_after = float(compose["services"]["api"]["stop_grace_period"].removesuffix("s"))
    assert stop_after >= grace + 5, "compose would kill the service while it still finishes requests"


def test_migrate_and_api_share_the_image_and_every_setting(compose: dict[str, Any]) -> None:
    """The migration makes the vector column with the dimension the api then serves with."""
    migrate, api = compose["services"]["migrate"], compose["services"]["api"]
    assert migrate["image"] == api["image"] and migrate["build"] == api["build"] == "."
    assert _environment(migrate) == _environment(api)
    url = _environment(api)["ENGRAM_DATABASE_URL"]
    example = _env_example()
    assert url == (
        f"postgresql://{example['POSTGRES_USER']}:{example['POSTGRES_PASSWORD']}@db:5432/{example['POSTGRES_DB']}"
    )
    settings = Settings(**{k.removeprefix("ENGRAM_").lower(): v for k, v in _environment(api).items()})
    assert settings.database_url is not None


def test_no_secret_is_written_in_the_compose_file(raw: dict[str, Any]) -> None:
    text = COMPOSE.read_text()
    assert "change-me" not in text
    password = raw["services"]["db"]["environment"]["POSTGRES_PASSWORD"]
    assert password.startswith("${POSTGRES_PASSWORD:?")
    assert "${POSTGRES_PASSWORD:?" in raw["x-engram"]["environment"]["ENGRAM_DATABASE_URL"]


def test_a_missing_password_stops_compose_with_a_message(raw: dict[str, Any]) -> None:
    env = {k: v for k, v in _env_example().items() if k != "POSTGRES_PASSWORD"}
    with pytest.raises(KeyError, match=r"set POSTGRES_PASSWORD in \.env"):
        _interpolate(raw, env)


def variable(field: str) -> str:
    """The variable a setting is read from: ENGRAM_<NAME>, or the general one of OpenTelemetry's names for it."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[-1])
    return str(alias) if alias else f"ENGRAM_{field.upper()}"


def test_env_example_lists_every_variable_with_a_comment(raw: dict[str, Any]) -> None:
    lines = ENV_EXAMPLE.read_text().splitlines()
    listed: dict[str, int] = {}
    for number, line in enumerate(lines):
        match = re.match(r"^#?\s?([A-Z][A-Z0-9_]*)=", line)
        if match:
            listed[match.group(1)] = number
    settings = {variable(name) for name in Settings.model_fields}
    used_by_compose = {m.group(1) for m in _VARIABLE.finditer(COMPOSE.read_text()) if m.group(1)}
    assert settings <= set(listed), f"missing: {sorted(settings - set(listed))}"
    assert used_by_compose <= set(listed), f"missing: {sorted(used_by_compose - set(listed))}"
    assert set(listed) <= settings | used_by_compose, "nothing listed that no one reads"
    variable_lines = set(listed.values())
    for name, number in listed.items():
        # Each variable sits under a comment saying what it is, maybe shared by a group of variables.
        above = [n for n in range(number) if lines[n].strip() and n not in variable_lines]
        assert above and lines[above[-1]].startswith("# "), name
        assert above[-1] >= number - 4, f"{name} is too far from its comment"


def test_env_example_as_is_gives_valid_settings() -> None:
    """Copied unchanged it must work; every commented default must parse as the setting it documents."""
    uncommented = {k: v for k, v in _env_example().items() if k.startswith("ENGRAM_")}
    assert Settings(**{k.removeprefix("ENGRAM_").lower(): v for k, v in uncommented.items()})
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = re.match(r"^# (ENGRAM_[A-Z0-9_]+)=(.*)$", line)
        if not match or match.group(1) in {"ENGRAM_DATABASE_URL", "ENGRAM_DATA_DIR", "ENGRAM_API_KEYS_FILE"}:
            continue
        if match.group(1) == "ENGRAM_API_KEYS":
            continue  # an example value, not the default (no keys)
        field = match.group(1).removeprefix("ENGRAM_").lower()
        default = Settings.model_fields[field].get_default(call_default_factory=True)
        if default is None:
            continue  # unset by default: the line shows an example value
        parsed = Settings(**{field: match.group(2)})
        assert getattr(parsed, field) == default, f"{match.group(1)} shows a wrong default"
