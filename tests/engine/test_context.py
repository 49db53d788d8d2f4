"""What is embedded for an item: its own text, then the end of the items before it in its thread."""

from __future__ import annotations

from app.contract.items import ITEM_ADAPTER
from app.engine.context import BEFORE_CHARS, BEFORE_ITEMS, embedded_text, texts_to_embed, thread_of, without_roles


def turn(text: str, **meta: str) -> object:
    item = {"type": "conversation", "turns": [{"role": "user", "text": text}], "meta": meta}
    return ITEM_ADAPTER.validate_python(item).checked()


def test_an_item_outside_a_thread_is_embedded_as_it_is() -> None:
    assert embedded_text("Yes, last Tuesday!", []) == "Yes, last Tuesday!"
    assert thread_of(turn("hello")) is None  # type: ignore[arg-type]


def test_a_thread_is_its_namespace_and_id() -> None:
    assert thread_of(turn("hi", thread_id="t1")) == ("", "t1")  # type: ignore[arg-type]
    assert thread_of(turn("hi", thread_id="t1", namespace=" user:ana ")) == ("user:ana", "t1")  # type: ignore[arg-type]


def test_the_item_comes_first_then_the_items_before_read_from_their_end() -> None:
    before = ["too far back", "x" * 1000, "Did you go to the pottery class?"]
    text = embedded_text("Yes, last Tuesday!", before)
    assert text.startswith("Yes, last Tuesday!\nxxx")
    assert text.endswith("x\nDid you go to the pottery class?")
    assert len(text) == len("Yes, last Tuesday!\n") + BEFORE_CHARS
    assert embedded_text("c", ["a", "b"]) == "c\na\nb" and BEFORE_ITEMS == 2


def test_role_prefixes_are_left_out_and_speakers_kept() -> None:
    rendered = "user: Ines: I went yesterday.\nassistant: Noted.\ntool: ok"
    assert without_roles(rendered) == "Ines: I went yesterday.\nNoted.\nok"
    assert embedded_text("user: Ines: Yes!", ["assistant: Did you go?"]) == "Ines: Yes!\nDid you go?"
    # Only a line's first word as a role: "Note: user: x" and "username: x" stay.
    assert without_roles("Note: user: x\nusername: y") == "Note: user: x\nusername: y"


def test_each_item_of_a_batch_follows_the_ones_before_it_in_its_own_thread() -> None:
    a, b = ("", "a"), ("", "b")
    texts = ["a1", "b1", "a2", "lone", "b2", "a3"]
    threads = [a, b, a, None, b, a]
    assert texts_to_embed(texts, threads, {a: ["a-1", "a0"]}) == [
        "a1\na-1\na0",
        "b1",
        "a2\na0\na1",
        "lone",
        "b2\nb1",
        "a3\na1\na2",
    ]
