"""Sentence choice, time resolution in the answer, and citation snippets, over hand-made hits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.contract.meta import Meta, TurnRange
from app.contract.requests import Hit
from app.engine import answers
from app.engine.answers import compose, question_kind
from app.engine.sentences import content_stems, speakers, split

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday


def hit(text: str, rank: int = 0, kind: str = "learning", said: datetime | None = SAID) -> Hit:
    return Hit(
        id=f"{rank:040x}",
        kind=kind,  # type: ignore[arg-type]
        text=text,
        meta=Meta(observed_at=said),
        score=1.0 / (rank + 1),
    )


def hits(*texts: str, kind: str = "learning") -> list[Hit]:
    return [hit(text, rank, kind) for rank, text in enumerate(texts)]


def turn(speaker: str, text: str) -> str:
    return f"user: {speaker}: {text}"


def numbered(rank: int, number: int, speaker: str, text: str) -> Hit:
    """A conversation turn stored as its own item: turn ``number`` of one thread."""
    meta = Meta(namespace="user:ana", thread_id="evening", turns=TurnRange(first=number, last=number), observed_at=SAID)
    return Hit(id=f"{rank:040x}", kind="conversation", text=turn(speaker, text), meta=meta, score=1.0 / (rank + 1))


LEARNINGS = [
    "Remember: deploys happen on Thursdays only.",
    "The user prefers tabs over spaces.",
    "I moved to Lisbon in March 2024",
    "The user's favourite editor is vim.",
]


def test_where_answers_from_the_sentence_naming_a_place_though_it_shares_no_word() -> None:
    answer = compose("Where does the user live now?", hits(*LEARNINGS))
    assert answer.answer == '"I moved to Lisbon in March 2024" [3]'
    assert answer.citations[2].snippet == "I moved to Lisbon in March 2024"
    assert answer.model == "engram-extractive-4"


def test_role_words_and_speakers_names_are_no_evidence() -> None:
    conversation = hits(
        turn("Tomas", "Hey Ines!"),
        turn("Ines", "Hey Tomas! Good to see you, Tomas."),
        turn("Ines", "I signed up for a woodworking class with my sister."),
        kind="conversation",
    )
    answer = compose("What class did Ines sign up for, Tomas?", conversation)
    assert answer.answer.startswith('Ines: "I signed up for a woodworking class with my sister." [3]')
    assert speakers([h.text for h in conversation]) == {"tomas", "ines"}
    assert content_stems("the user asked the assistant", frozenset()) == {"ask"}


def test_the_words_of_the_one_the_question_names_come_first() -> None:
    conversation = hits(
        turn("John", "Back at school I was the loudest trumpet in the band."),
        turn("James", "I used to play a guitar when I was younger."),
        kind="conversation",
    )
    answer = compose("Which instrument did James play?", conversation)
    assert answer.answer.startswith('James: "I used to play a guitar when I was younger." [2]')
    # Asked of John, the same hits answer with John's words.
    assert compose("Which instrument did John play?", conversation).answer.startswith("John:")


def test_a_short_sentence_without_content_words_is_never_chosen_alone() -> None:
    greetings = [turn("Tomas", "Hey Ines!"), turn("Ines", "Hey Tomas!")]
    answer = compose("Hey Tomas, how are you?", hits(*greetings, kind="conversation"))
    assert answer.answer.startswith(answers.NOTHING_SHARED)  # said as the closest memory, not as an answer
    news = hits(*greetings, turn("Ines", "The woodworking class starts soon."), kind="conversation")
    reply = compose("Hey Tomas, how are you?", news).answer
    assert reply == f'{answers.NOTHING_SHARED} Ines: "The woodworking class starts soon." [3]'


def test_stemming_matches_forms_of_one_word() -> None:
    chosen = compose("Who is moving house?", hits("The weather is grey.", "Priya moves house in June."))
    assert chosen.answer.startswith('"Priya moves house in June." [2]')


def test_the_rank_of_a_hit_breaks_ties_between_equal_sentences() -> None:
    answer = compose("which tea does the user drink?", hits("The user drinks green tea.", "The user drinks black tea."))
    assert answer.answer.startswith('"The user drinks green tea." [1]')


def test_one_sentence_when_a_second_adds_nothing() -> None:
    answer = compose(
        "What colour is the kayak?",
        hits("The kayak is red.", "The kayak is red, like the old kayak was.", "The garden has roses."),
    )
    assert answer.answer == '"The kayak is red." [1]'


def test_a_second_sentence_when_it_adds_words_the_first_lacked() -> None:
    answer = compose(
        "What colour is the kayak and where is the paddle kept?",
        hits("The kayak is red.", "The paddle hangs in the garage."),
    )
    assert answer.answer == '"The kayak is red." [1] "The paddle hangs in the garage." [2]'


def test_a_question_asked_back_is_not_the_answer() -> None:
    answer = compose(
        "How often does Ana walk the dogs?",
        hits(
            turn("Ben", "How often do you walk the dogs?"),
            turn("Ana", "Twice a day, rain or shine."),
            kind="conversation",
        ),
    )
    assert answer.answer.startswith('Ana: "Twice a day, rain or shine." [2]')


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Where does Ana live?", "place"),
        ("When did Ana move?", "time"),
        ("What year did Ana move?", "time"),
        ("Who gave Ana the bike?", "person"),
        ("How many dogs does Ana have?", "number"),
        ("How long has Ana lived there?", "number"),
        ("What does Ana cook?", None),
        ("Which bakery sells the rye?", "name"),
        ("What is the name of Ana's cat?", "name"),
        ("In which town did Ana grow up?", "place"),
        ("Since when has Ana kept bees?", "time"),
        # Further in, "when", "where", "who" and "which" join a clause: they ask for nothing.
        ("What did Ana cook when she lived in Lisbon?", None),
        ("What is the town where they met?", None),
        ("What did the friend who visited bring?", None),
        ("What is the book which Ana lent?", None),
    ],
)
def test_the_question_word_names_what_kind_of_answer_is_wanted(question: str, kind: str | None) -> None:
    assert question_kind(question) == kind


def test_when_prefers_the_sentence_with_a_time_and_resolves_it() -> None:
    conversation = hits(
        turn("Ana", "The choir rehearsal was moving."),
        turn("Ana", "I went to the choir rehearsal yesterday."),
        kind="conversation",
    )
    answer = compose("When did Ana go to the choir rehearsal?", conversation)
    assert answer.answer.startswith('May 7, 2023 \u2014 Ana: "I went to the choir rehearsal yesterday." [2]')
    assert answer.citations[1].snippet == "I went to the choir rehearsal yesterday."


def test_who_prefers_a_person_and_how_many_a_number() -> None:
    people = hits("The bike was a present for the birthday.", "The bike came from Tomasz for the birthday.")
    assert compose("Who gave the bike for the birthday?", people).answer.startswith('"The bike came from Tomasz')
    numbers = hits("The user has dogs at home.", "The user has three dogs.")
    assert compose("How many dogs does the user have?", numbers).answer.startswith('"The user has three dogs."')


def test_every_relative_time_of_the_quote_is_written_out_the_first_first_when_asked_when() -> None:
    answer = compose("When did the user hike?", [hit("I hiked last weekend and swam two years ago.")])
    assert answer.answer == (
        'the weekend before May 8, 2023 \u2014 "I hiked last weekend and swam two years ago." '
        "(two years ago = 2021) [1]"
    )
    # Asked what, not when, the times are notes beside the quote.
    answer = compose("What did the user do on the hike?", [hit("I hiked last weekend and swam two years ago.")])
    assert answer.answer == (
        '"I hiked last weekend and swam two years ago." '
        "(last weekend = the weekend before May 8, 2023; two years ago = 2021) [1]"
    )


def test_a_when_question_without_a_time_in_the_sentence_gives_the_day_it_was_said() -> None:
    answer = compose("When did the user adopt the puppy?", [hit("We adopted a puppy called Biscuit.")])
    assert answer.answer == '"We adopted a puppy called Biscuit." (said May 8, 2023) [1]'


def test_without_an_observed_time_a_relative_time_stays_as_written() -> None:
    answer = compose("When did the user hike?", [hit("I hiked yesterday.", said=None)])
    assert answer.answer == '"I hiked yesterday." [1]'


def test_openers_are_left_out_of_the_quote_but_not_the_snippet() -> None:
    answer = compose("What did the user bake?", [hit("Wow, by the way, I baked rye bread.")])
    assert answer.answer == '"I baked rye bread." [1]'
    assert answer.citations[0].snippet == "Wow, by the way, I baked rye bread."


def test_a_citation_snippet_is_its_best_sentence_with_context_when_short() -> None:
    long_first = "An unrelated opening sentence that runs on about the weather and nothing else at all. "
    texts = [
        long_first + "The kayak is red.",
        "The paddle is new. The kayak hangs in the garage beside the bikes.",
        "Nothing here shares a word.",
    ]
    answer = compose("What colour is the kayak?", hits(*texts))
    snippets = [c.snippet for c in answer.citations]
    assert snippets[0] == f"{long_first.strip()} The kayak is red."  # short: the sentence before it too
    assert snippets[1] == "The kayak hangs in the garage beside the bikes."  # its best sentence, not its start
    assert snippets[2] == "Nothing here shares a word."
    assert [c.id for c in answer.citations] == [h.id for h in hits(*texts)]


def test_framing_is_split_off_sentences() -> None:
    (first, second) = split("user: Ines: Hey Tomas! I went yesterday.")
    assert (first.text, first.speaker, second.text, second.position) == ("Hey Tomas!", "Ines", "I went yesterday.", 1)
    lines = split("user: Ben: Which one? Tell me.\n\nassistant: Ana: Rooibos.")
    assert [(s.line, s.position) for s in lines] == [(0, 0), (0, 1), (1, 2)]  # blank lines are not counted
    assert [s.speaker for s in split("Note: deploys happen on Thursdays.")] == [None]
    assert [s.text for s in split("# Deploys\n\nThey run on Thursdays.")] == ["Deploys", "They run on Thursdays."]


def test_no_hits_say_nothing_is_stored() -> None:
    answer = compose("Where does the user live?", [])
    assert answer.answer == answers.NOTHING_STORED and answer.citations == []


def test_which_prefers_the_sentence_naming_something() -> None:
    reading = hits("The user is reading a novel every evening.", 'The user is reading the novel "Salt Road" now.')
    assert compose("Which novel is the user reading?", reading).answer == (
        '"The user is reading the novel "Salt Road" now." [2]'
    )


def test_a_reply_answers_what_the_turn_just_before_it_asked() -> None:
    question = "What tea does Ana reach for first?"
    liking = numbered(0, 9, "Ana", "I like tea a lot, honestly.")
    asking = numbered(1, 3, "Ben", "Which tea do you reach for first?")
    # "Rooibos, every morning." shares no word of the question, but replies to the turn that asked it.
    answer = compose(question, [liking, asking, numbered(2, 4, "Ana", "Rooibos, every morning.")]).answer
    assert answer.startswith('Ana: "Rooibos, every morning." [3]')
    # The same words, not the turn after the one that asked: no reply, and the shared words win.
    answer = compose(question, [liking, asking, numbered(2, 6, "Ana", "Rooibos, every morning.")]).answer
    assert answer.startswith('Ana: "I like tea a lot, honestly." [1]')
    # Nor when the turn before asks nothing.
    telling = numbered(1, 3, "Ben", "We should get food later.")
    answer = compose(question, [liking, telling, numbered(2, 4, "Ana", "Rooibos, every morning.")]).answer
    assert answer.startswith('Ana: "I like tea a lot, honestly." [1]')


def test_a_reply_in_the_same_item_and_a_reply_alone_is_an_answer() -> None:
    exchange = hit(turn("Ben", "Which tea do you reach for first?") + "\n" + turn("Ana", "Rooibos, every morning."))
    answer = compose("What tea does the user reach for first?", [exchange]).answer
    assert answer == 'Ana: "Rooibos, every morning." [1]'  # an answer, not "no stored memory shares..."


def test_a_word_rare_among_the_hits_weighs_more_than_a_common_one() -> None:
    lake = hits("We swam in the lake.", "The kayak is blue.", "The lake was cold.", "The lake is near.")
    # Both first sentences hold one of "lake" and "kayak"; three sentences say "lake", one "kayak".
    answer = compose("What did the user do at the lake with the kayak?", lake).answer
    assert answer.startswith('"The kayak is blue." [2]')


def test_a_long_sentence_is_cut_to_the_clauses_holding_what_is_asked() -> None:
    shop = [hit("What a day, honestly, we finally launched the boat last week!")]
    assert compose("When did the user launch the boat?", shop).answer == (
        'the week before May 8, 2023 \u2014 "\u2026 we finally launched the boat last week!" [1]'
    )
    moved = [hit("We moved to Porto - the rent there was far too high for us.")]
    assert compose("Where did the user move?", moved).answer == '"We moved to Porto \u2026" [1]'
    # Short sentences, and questions asking for no kind, keep the whole sentence.
    assert compose("When did the user open it?", [hit("Wow, so, I opened it, last week.")]).answer == (
        'the week before May 8, 2023 \u2014 "I opened it, last week." [1]'
    )
    assert compose("What did the user launch?", shop).answer == (
        '"What a day, honestly, we finally launched the boat last week!" (last week = the week before May 8, 2023) [1]'
    )


def test_a_first_sentence_holding_most_of_the_question_and_its_kind_is_the_answer_alone() -> None:
    boat = hits(
        "I repainted the boat last Saturday.", "The old shed leaks.", "The old gate creaks.", "The old fence leans."
    )
    # "old" is in three of the four sentences: it weighs little, and the first holds the rest and a time.
    answer = compose("When did the user repaint the old boat?", boat).answer
    assert answer == 'May 6, 2023 \u2014 "I repainted the boat last Saturday." [1]'


def test_a_sentence_restating_the_question_lets_one_with_words_of_its_own_follow() -> None:
    baking = hits("I baked with my aunt.", "Almond biscuits, every Sunday.")
    answer = compose("What did the user bake with their aunt?", baking).answer
    assert answer == '"I baked with my aunt." [1] "Almond biscuits, every Sunday." [2]'
