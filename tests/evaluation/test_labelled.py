"""Reading labelled sets: the JSONL format, LoCoMo's JSON, bundled names, and one-line refusals."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from app.evaluation.labelled import (
    LabelledSetError,
    evidence_ids,
    load,
    read_jsonl,
    read_locomo,
    session_time,
)

HERE = Path(__file__).parent
TINY = HERE / "tiny.jsonl"
LOCOMO_LIKE = HERE / "locomo-like.json"
REPO = HERE.parents[1]
LOCOMO_DEV = REPO / ".." / "shared" / "data" / "locomo-dev" / "locomo-dev.json"


def write(tmp_path: Path, *records: object, raw: str = "") -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text(raw + "".join(json.dumps(r) + "\n" for r in records))
    return path


ITEM = {"type": "item", "key": "k1", "item": {"type": "learning", "text": "t", "kind": "fact", "confidence": 1}}
QUESTION = {"type": "question", "key": "q1", "question": "t?", "gold": ["k1"], "category": "c"}


def test_jsonl_reads_items_and_questions_skipping_blank_and_comment_lines() -> None:
    labelled = read_jsonl(TINY)
    assert labelled.name == "tiny"
    assert [i.key for i in labelled.items] == ["otter", "kettle", "lantern", "garden"]
    assert labelled.items[1].body == {
        "type": "document",
        "body": {"text": "A quixotic kettle whistles in the attic"},
        "meta": {"namespace": "user:alice"},
    }
    assert labelled.items[1].line == 3
    lantern = labelled.questions[2]
    assert (lantern.key, lantern.gold, lantern.category, lantern.namespace, lantern.answer) == (
        "q-lantern",
        ("lantern",),
        "named",
        "user:alice",
        "Florimond",
    )
    assert labelled.questions[0].namespace is None
    assert labelled.categories_seen == ("exact", "named")


def test_a_question_without_category_is_uncategorised(tmp_path: Path) -> None:
    question = {k: v for k, v in QUESTION.items() if k != "category"}
    assert read_jsonl(write(tmp_path, ITEM, question)).questions[0].category == "uncategorised"


@pytest.mark.parametrize(
    ("records", "raw", "message"),
    [
        ([ITEM, {**QUESTION, "gold": ["k2"]}], "", "set.jsonl line 2: gold names no item: k2"),
        ([ITEM, ITEM, QUESTION], "", "set.jsonl line 2: duplicate key 'k1' (first on line 1)"),
        ([ITEM, {**QUESTION, "key": "k1"}], "", "set.jsonl line 2: duplicate key 'k1'"),
        ([ITEM, {**QUESTION, "gold": []}], "", "set.jsonl line 2: 'gold' must be a non-empty list of item keys"),
        ([ITEM, {k: v for k, v in QUESTION.items() if k != "gold"}], "", "line 2: 'gold' must be a non-empty"),
        ([ITEM, QUESTION], "// a comment\n{not json\n", "set.jsonl line 2: not JSON"),
        ([{**ITEM, "type": "thing"}], "", 'line 1: \'type\' must be "item" or "question"'),
        ([{**ITEM, "colour": "red"}], "", "line 1: unknown key 'colour' for type 'item'"),
        ([ITEM, {**QUESTION, "question": " "}], "", "line 2: 'question' must be a non-blank string"),
        ([ITEM, {**QUESTION, "category": "all"}], "", "line 2: category 'all' is reserved"),
        ([ITEM, {**QUESTION, "namespace": "org:x"}], "", "line 2: namespace segment 'org:x' must be kind:id"),
        (
            [{**ITEM, "item": {**ITEM["item"], "meta": {"namespace": "/".join(["user:a"] * 8)}}}, QUESTION],
            "",
            "line 1: namespace 'user:a/user:a/user:a/user:a/user:a/user:a/user:a/user:a' has more than 7 segments",
        ),
        ([ITEM], "", "set.jsonl: holds no question"),
    ],
)
def test_a_malformed_set_is_refused_in_one_line_naming_it(
    tmp_path: Path, records: list[object], raw: str, message: str
) -> None:
    with pytest.raises(LabelledSetError) as refused:
        read_jsonl(write(tmp_path, *records, raw=raw))
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_session_times_are_read_as_utc() -> None:
    assert session_time("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00Z"
    assert session_time("12:04 am on 1 January, 2024") == "2024-01-01T00:04:00Z"
    assert session_time("12:30 pm on 1 January, 2022") == "2022-01-01T12:30:00Z"
    with pytest.raises(ValueError):
        session_time("yesterday")


def test_evidence_ids_are_split_and_normalised() -> None:
    assert evidence_ids(["D8:6; D9:17", "D:11:26", "D30:05", "D", "D1:2 D3:4", "D8:6"]) == [
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
        "D1:2",
        "D3:4",
    ]


def test_locomo_turns_become_one_item_each_in_their_conversation_namespace() -> None:
    labelled = read_locomo(LOCOMO_LIKE)
    assert len(labelled.items) == 7
    photo = next(i for i in labelled.items if i.key == "pair-1/D1:2")
    assert photo.body == {
        "type": "conversation",
        "turns": [
            {
                "role": "user",
                "text": "Tobiah: Nice! I spent the weekend baking rye bread."
                " [shares a photo of a loaf on a wooden board]",
                "at": "2021-03-02T09:05:00Z",
            }
        ],
        "meta": {
            "namespace": "user:pair-1",
            "thread_id": "session_1",
            "turns": {"first": 1, "last": 1},
            "source": {"kind": "conversation", "id": "D1:2"},
            "observed_at": "2021-03-02T09:05:00Z",
        },
    }
    farewells = [i.body for i in labelled.items if i.body["turns"][0]["text"] == "Mirela: See you!"]
    assert len(farewells) == 2 and farewells[0] != farewells[1]  # distinct items, not one folded by idempotence


def test_locomo_questions_keep_normalised_gold_and_skip_those_left_without() -> None:
    labelled = read_locomo(LOCOMO_LIKE)
    by_text = {q.text: q for q in labelled.questions}
    assert by_text["Where did they take the canoe after repairing it?"].gold == ("pair-1/D1:1", "pair-1/D2:1")
    assert by_text["When did Tobiah paddle across the reservoir?"].gold == ("pair-1/D2:1",)
    assert by_text["What did Tobiah photograph?"].category == "open-domain"
    assert by_text["What did Tobiah photograph?"].gold == ("pair-1/D1:2",)
    assert by_text["Who taught Oskar chess?"].gold == ("pair-2/D1:1", "pair-2/D1:2")
    assert by_text["Who taught Oskar chess?"].namespace == "user:pair-2"
    adversarial = by_text["What did Mirela bake?"]
    assert (adversarial.category, adversarial.answer) == ("adversarial", "rye bread")
    assert "What colour is the shed?" not in by_text
    assert labelled.skipped == 1


def test_locomo_asks_categories_one_to_four_unless_told() -> None:
    labelled = load(LOCOMO_LIKE)
    default = labelled.select(None)
    assert sorted({q.category for q in default.questions}) == ["multi-hop", "open-domain", "single-hop", "temporal"]
    assert default.not_asked == 1
    only = labelled.select(("adversarial",))
    assert [q.category for q in only.questions] == ["adversarial"]
    with pytest.raises(LabelledSetError, match="no question has category colour"):
        labelled.select(("colour",))


def test_load_tells_the_formats_apart_and_refuses_an_unknown_name() -> None:
    assert load(TINY).name == "tiny" and len(load(TINY).items) == 4
    assert load(str(LOCOMO_LIKE)).excluded_by_default == ("adversarial",)
    with pytest.raises(LabelledSetError, match="no-such-set: no such file, nor a bundled set"):
        load("no-such-set")


def test_a_name_finds_a_bundled_set_shipped_with_the_package() -> None:
    from app.evaluation.labelled import bundled, bundled_names

    for name in bundled_names():
        assert bundled(name) is not None
        assert load(name).questions
    assert bundled("../tiny") is None


def test_the_locomo_dev_split_reads_whole() -> None:
    if not LOCOMO_DEV.is_file():
        # CI always has it beside the clone; a clone elsewhere may not (it is licensed for evaluation only).
        if os.environ.get("CI"):
            pytest.fail(f"the LoCoMo dev split is missing at {LOCOMO_DEV}")
        pytest.skip("the LoCoMo dev split lives outside the repository, in ../shared")
    labelled = load(LOCOMO_DEV)
    assert len({k.split("/")[0] for k in (i.key for i in labelled.items)}) == 5
    assert len(labelled.items) == 3122
    assert len({json.dumps(i.body, sort_keys=True) for i in labelled.items}) == 3122
    asked = labelled.select(None)
    counts = Counter(q.category for q in asked.questions)
    assert counts == {"single-hop": 423, "temporal": 165, "multi-hop": 140, "open-domain": 48}
    assert labelled.skipped == 2
    assert len(labelled.questions) + labelled.skipped == 987
