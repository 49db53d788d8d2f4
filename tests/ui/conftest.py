"""What the explorer's browser tests need: Debian's chromium, axe-core from npm, a folder for the
screenshots. Each is required: a missing one fails the run, it never skips it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.support.scratch import REPO

HERE = Path(__file__).parent
ARTIFACTS = Path(os.environ.get("ENGRAM_UI_ARTIFACTS", REPO / "artifacts" / "ui"))


def chromium_path() -> str:
    """ENGRAM_CHROMIUM, else Debian's chromium on PATH; Playwright's own download is never used."""
    found = os.environ.get("ENGRAM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no chromium for the explorer's browser tests: apt-get install -y chromium (.ci/run does)")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Module-scoped: the sync API runs its own loop, which must not outlive these tests."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path())
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def axe_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    """axe-core as tests/ui/package-lock.json pins it, installed with npm ci into a temporary folder."""
    npm = shutil.which("npm")
    if not npm:
        pytest.fail("no npm for axe-core: apt-get install -y nodejs npm (.ci/run does)")
    folder = tmp_path_factory.mktemp("axe")
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(HERE / name, folder / name)
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return (folder / "node_modules" / "axe-core" / "axe.min.js").read_text()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where each step's screenshot lands (gitignored; CI keeps the folder), emptied at the start."""
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shots = sorted(ARTIFACTS.glob("*.png")) if ARTIFACTS.is_dir() else []
    if shots:
        terminalreporter.write_line(f"explorer screenshots: {len(shots)} in {ARTIFACTS}")
