"""``engram eval`` end to end, in a subprocess: a private embedded service, stdout, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.evaluation.report import CheckFailure, check

HERE = Path(__file__).parent
REPO = HERE.parents[1]
TINY = HERE / "tiny.jsonl"


def engram(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "eval", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_json_report_of_a_private_embedded_service(tmp_path: Path) -> None:
    details = tmp_path / "details.jsonl"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = engram(str(TINY), "--json", "--check", "--details", str(details), "--k", "1,3", env={"TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["set"], doc["items"], doc["questions"], doc["skipped"]) == ("tiny", 4, 4, 0)
    assert doc["k"] == [1, 3]
    assert doc["embedder"] == "bge-small-en-v1.5 (384 dimensions)"  # the default, loaded by the command
    assert doc["engine"]["id"] == "postgres"
    assert list(doc["modes"]) == ["keyword", "vector", "hybrid"]
    assert list(doc["modes"]["hybrid"]) == ["all", "exact", "named"]
    assert doc["modes"]["keyword"]["all"] == {
        "recall@1": 1.0,
        "recall@3": 1.0,
        "mrr": 1.0,
        "ndcg@10": 1.0,
        "count": 4,
    }
    assert doc["check"] == {"metric": "recall@3", "tolerance": 0.0, "failures": []}
    lines = [json.loads(line) for line in details.read_text().splitlines()]
    assert len(lines) == 4 * 3
    lantern = next(x for x in lines if x["key"] == "q-lantern" and x["mode"] == "keyword")
    assert lantern["keys"][0] == "lantern" and lantern["ids"][0] == lantern["gold"][0]
    assert lantern["answer"] == "Florimond" and len(lantern["scores"]) == len(lantern["ids"])
    assert lantern["recalled"].strip()
    assert doc["answers"]["named"]["count"] == 1
    assert list(scratch.glob("engram-eval-*")) == []  # the private server and its directory are gone


def test_plain_table_by_default_with_a_chosen_mode() -> None:
    done = engram(str(TINY), "--modes", "keyword", "--quiet", "--no-answers")
    assert done.returncode == 0, done.stderr
    assert "engram.access" not in done.stderr, "the in-process service's access lines would bury the report"
    lines = done.stdout.splitlines()
    assert lines[0] == "set tiny: 4 items, 4 questions"
    header = next(line for line in lines if line.startswith("keyword"))
    assert header.split() == ["keyword", "recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "n"]
    assert ["all", "1.000", "1.000", "1.000", "1.000", "1.000", "4"] in [line.split() for line in lines]
    assert "vector" not in done.stdout
    assert "holds_gold" not in done.stdout


def test_a_malformed_set_ends_in_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "question", "key": "q", "question": "why?", "gold": ["nothing"]}\n')
    done = engram(str(bad))
    assert done.returncode == 2
    assert done.stderr == "engram: bad.jsonl line 1: gold names no item: nothing\n"
    assert done.stdout == ""


def test_an_unreachable_service_ends_in_one_line_without_the_key() -> None:
    done = engram(str(TINY), "--url", "http://127.0.0.1:9", env={"ENGRAM_EVAL_API_KEY": "sekrit-key-123"})
    assert done.returncode == 2
    assert done.stderr.startswith("engram: cannot reach http://127.0.0.1:9")
    assert len(done.stderr.splitlines()) == 1
    assert "sekrit" not in done.stderr + done.stdout


def test_check_names_every_row_where_hybrid_trails_the_better_half() -> None:
    def modes(keyword: float, vector: float, hybrid: float) -> dict[str, dict[str, float]]:
        return {"keyword": {"recall@10": keyword}, "vector": {"recall@10": vector}, "hybrid": {"recall@10": hybrid}}

    rows = {"all": modes(0.6, 0.4, 0.6), "temporal": modes(0.5, 0.7, 0.65), "single-hop": modes(0.8, 0.2, 0.75)}
    doc = {"modes": {m: {c: rows[c][m] for c in rows} for m in ("keyword", "vector", "hybrid")}}
    assert check(doc, "recall@10") == [
        CheckFailure("temporal", 0.65, "vector", 0.7),
        CheckFailure("single-hop", 0.75, "keyword", 0.8),
    ]
    assert [f.category for f in check(doc, "recall@10", tolerance=0.06)] == []
    assert [f.category for f in check(doc, "recall@10", tolerance=0.05)] == []
    assert [f.category for f in check(doc, "recall@10", tolerance=0.04)] == ["temporal", "single-hop"]
    assert str(check(doc, "recall@10")[0]) == "hybrid temporal: 0.650 < vector 0.700"
    # The overall row alone, for a set whose categories are too small to hold to it.
    assert check(doc, "recall@10", overall=True) == []
    rows["all"] = modes(0.6, 0.4, 0.59)
    doc = {"modes": {m: {c: rows[c][m] for c in rows} for m in ("keyword", "vector", "hybrid")}}
    assert [f.category for f in check(doc, "recall@10", overall=True)] == ["all"]
