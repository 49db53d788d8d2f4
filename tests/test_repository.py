"""The repository itself: no merge left half done, no evaluation-only text copied in."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("<<<<<<< ", ">>>>>>> ")
# Licensed for internal evaluation only (its README): none of its text may enter the repository.
LOCOMO_DEV = REPO / ".." / "shared" / "data" / "locomo-dev" / "locomo-dev.json"
# Sentences this long are the conversation's own words, not a phrase any text could hold.
QUOTED_CHARS = 35


def _tracked_texts() -> dict[str, str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    texts = {}
    for name in tracked:
        try:
            texts[name] = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (a figure), or a file deleted in the working tree
    return texts


def test_no_file_holds_a_conflict_marker() -> None:
    marked = []
    for name, text in _tracked_texts().items():
        marked += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if line.startswith(MARKERS)]
    assert not marked, f"conflict markers left in {marked}"


def test_no_file_quotes_the_long_conversation_dev_split() -> None:
    if not LOCOMO_DEV.is_file():
        # CI always has it beside the clone; a clone elsewhere may not.
        if os.environ.get("CI"):
            pytest.fail(f"the LoCoMo dev split is missing at {LOCOMO_DEV}")
        pytest.skip("the LoCoMo dev split lives outside the repository, in ../shared")
    sentences = set()
    for sample in json.loads(LOCOMO_DEV.read_text(encoding="utf-8")):
        sessions = [turns for turns in sample["conversation"].values() if isinstance(turns, list)]
        said = [turn.get("text", "") for turns in sessions for turn in turns]
        asked = [qa.get("question", "") for qa in sample["qa"]]
        for text in (*said, *asked):
            sentences.update(s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) >= QUOTED_CHARS)
    quoted = [f"{name}: {s[:60]}" for name, text in _tracked_texts().items() for s in sentences if s in text]
    assert not quoted, f"text of the evaluation-only dev split in the tree: {quoted}"
