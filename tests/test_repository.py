"""The repository itself: no merge left half done."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("<<<<<<< ", ">>>>>>> ")


def test_no_file_holds_a_conflict_marker() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    marked = []
    for name in tracked:
        try:
            lines = (REPO / name).read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (a figure), or a file deleted in the working tree
        marked += [f"{name}:{n}" for n, line in enumerate(lines, 1) if line.startswith(MARKERS)]
    assert not marked, f"conflict markers left in {marked}"
