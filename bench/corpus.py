"""A deterministic, agent-style memory corpus and the queries run against it.

Texts are 10-60 words drawn from a Zipf-like vocabulary (common English words
first, so queries are as full of stop words and frequent terms as real ones),
spread over ~50 namespaces in a tree and ~20 tags, in all three item kinds.
The same seed always gives the same items, ids and queries.
"""

from __future__ import annotations

import json
import os
import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any

from app.contract.items import ITEM_ADAPTER

# Ranked roughly by how often words turn up in agent notes: function words, then the domain.
VOCABULARY = """
the to and a of in is for that it on with this be as not we at by from or are have was use
user should when an if can it's all but so you do they will after before new need more than
also only because then which one two first last into about over every each other same still
agent tool file code test build deploy error config service request response data table query
api key value server client run fix update change add remove check log time version branch
commit merge review release issue bug fail failed works working prefers preference remember
note learned always never default setting team project workspace repo function method class
type field name path folder document page section summary answer question task step plan
memory context session thread message turn reply ask asked said wants likes dislikes style
format output input result return call retry timeout limit cache index search filter sort
list read write store fetch load save delete create open close start stop restart install
upgrade migrate schema database postgres vector embedding model prompt token cost latency
slow fast quick small large long short simple clear clean safe secure auth login password
secret permission role admin owner customer invoice billing payment plan price order account
email notify alert monitor metric dashboard report chart graph trace span debug warning info
python rust typescript javascript go java sql bash docker kubernetes terraform aws linux mac
windows browser mobile frontend backend worker queue job cron batch stream event hook webhook
git pull push rebase conflict tag label milestone sprint deadline meeting calendar schedule
monday friday morning evening week month quarter year today tomorrow yesterday soon later
tabs spaces indent lint format formatter prettier ruff black mypy pytest jest unit integration
coverage flaky ci pipeline runner artifact image container cluster node pod region zone
latency throughput p95 p99 benchmark profile optimize regression performance memory leak cpu
document draft spec design proposal decision record rfc readme changelog guide tutorial howto
contract agreement legal policy privacy gdpr compliance audit risk incident outage postmortem
onboarding offboarding hiring interview feedback goal okr roadmap priority backlog estimate
support ticket escalation sla customer churn feature request bugfix hotfix patch rollback
research paper experiment dataset training evaluation accuracy precision recall score metric
summary translate rewrite shorten expand explain compare recommend suggest prefer avoid
careful exact concise formal casual friendly polite direct detailed brief verbose terse
""".split()  # noqa: SIM905 (a word list reads better as text)

TAGS = [
    "deploy", "billing", "auth", "style", "testing", "infra", "onboarding", "bug", "docs", "perf",
    "security", "database", "frontend", "api", "ml", "release", "support", "research", "ops", "legal",
]  # fmt: skip

OPENERS = [
    "the user prefers",
    "remember that",
    "note:",
    "fixed by",
    "the build failed because",
    "the team decided",
    "always",
    "never",
    "when deploying",
    "the customer asked",
]

LEARNING_KINDS = ["preference", "fact", "procedure", "correction", "other"]
LANGUAGES = ["python", "rust", "typescript", "go", "sql"]
TOOLS = ["search", "read_file", "run_tests", "deploy", "sql_query", "http_get"]


def namespace_tree() -> list[str]:
    """~50 namespaces: the root, teams with agents and projects, users with their agents."""
    spaces = [""]
    for team in ("acme", "globex", "initech"):
        base = f"team:{team}"
        spaces.append(base)
        spaces += [f"{base}/agent:a{i}" for i in range(4)]
        for project in range(3):
            proj = f"{base}/project:p{project}"
            spaces.append(proj)
            spaces += [f"{proj}/agent:a{i}" for i in range(2)]
    for user in range(5):
        spaces.append(f"user:u{user}")
        spaces.append(f"user:u{user}/agent:assistant")
    return spaces


def subtree_roots() -> list[str]:
    """Nodes with children: where a ``descendants`` reach takes in more than one namespace."""
    return [ns for ns in namespace_tree() if ns and any(o.startswith(ns + "/") for o in namespace_tree())]


def _zipf_weights(count: int, exponent: float = 0.9) -> list[float]:
    return [1.0 / (rank**exponent) for rank in range(1, count + 1)]


@dataclass(frozen=True)
class CorpusItem:
    """One item as sent over HTTP, with what the baselines need to store it the same way."""

    id: str
    wire: dict[str, Any]  # the JSON body of one store_many item
    text: str  # rendered text (what is embedded and searched)
    namespace: str  # stored form: "" for the root
    tags: tuple[str, ...]
    row: dict[str, Any]  # the engram_items columns the engine writes (for the raw-SQL baseline)


class Generator:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        # Cumulative weights, summed once: ``choices`` given plain weights sums them on every call
        # (a third of drawing the corpus), and draws the same from either.
        self._vocab_cum_weights = list(accumulate(_zipf_weights(len(VOCABULARY))))
        spaces = namespace_tree()
        order = list(range(len(spaces)))
        random.Random(seed + 1).shuffle(order)
        self._spaces = [spaces[i] for i in order]
        self._space_cum_weights = list(accumulate(_zipf_weights(len(spaces), 0.8)))
        self._tag_cum_weights = list(accumulate(_zipf_weights(len(TAGS), 1.0)))

    def words(self, count: int) -> list[str]:
        return self._rng.choices(VOCABULARY, cum_weights=self._vocab_cum_weights, k=count)

    def sentence(self, count: int) -> str:
        words = self.words(count)
        if self._rng.random() < 0.4:
            opener = self._rng.choice(OPENERS).split()
            words = (opener + words)[:count]
        return " ".join(words).capitalize() + "."

    def tags(self) -> list[str]:
        count = self._rng.choices([0, 1, 2, 3], weights=[15, 45, 30, 10])[0]
        chosen: list[str] = []
        while len(chosen) < count:
            tag = self._rng.choices(TAGS, cum_weights=self._tag_cum_weights)[0]
            if tag not in chosen:
                chosen.append(tag)
        return chosen

    def item(self, index: int) -> dict[str, Any]:
        rng = self._rng
        total = rng.randint(10, 60)
        namespace = rng.choices(self._spaces, cum_weights=self._space_cum_weights)[0]
        meta: dict[str, Any] = {}
        if namespace:
            meta["namespace"] = namespace
        tags = self.tags()
        if tags:
            meta["tags"] = tags
        if rng.random() < 0.5:
            stamp = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=7 * index)
            meta["observed_at"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        if rng.random() < 0.3:
            meta["agent_id"] = f"agent-{rng.randint(0, 19)}"
        kind = rng.choices(["learning", "conversation", "document"], weights=[5, 3, 2])[0]
        if kind == "learning":
            return {
                "type": "learning",
                "text": self.sentence(total),
                "kind": rng.choice(LEARNING_KINDS),
                "confidence": round(rng.uniform(0.3, 1.0), 2),
                "meta": meta,
            }
        if kind == "conversation":
            meta["source"] = {"kind": "conversation", "id": f"conv-{index}"}
            meta["thread_id"] = f"thread-{rng.randint(0, 999)}"
            turns_n = rng.randint(2, min(6, max(2, total // 5)))
            turns = []
            for t in range(turns_n):
                turn: dict[str, Any] = {"role": "user" if t % 2 == 0 else "assistant", "text": ""}
                turn["text"] = self.sentence(max(3, total // turns_n))
                if turn["role"] == "assistant" and rng.random() < 0.3:
                    turn["tool_calls"] = [{"name": rng.choice(TOOLS), "id": f"call_{index}_{t}"}]
                turns.append(turn)
            return {"type": "conversation", "turns": turns, "meta": meta}
        language = rng.choice(LANGUAGES)
        meta.update(
            source={"kind": "file"},
            language=language,
            repo=f"repo-{rng.randint(0, 9)}",
            file_path=f"/src/{rng.choice(VOCABULARY[40:140])}/{index}.{language[:2]}",
        )
        title_n = rng.randint(2, 5)
        return {
            "type": "document",
            "title": self.sentence(title_n).rstrip("."),
            "body": {"text": self.sentence(max(5, total - title_n))},
            "meta": meta,
        }

    def query(self) -> str:
        """A natural-language question: 4-12 words, as full of common words as real ones."""
        return " ".join(self.words(self._rng.randint(4, 12)))


def _prepare(wire: dict[str, Any]) -> CorpusItem:
    """Validate with the service's own models so ids, text and rows are exactly what it stores."""
    item = ITEM_ADAPTER.validate_python(wire).checked()
    meta = item.meta.model_dump(mode="json", exclude_none=True)
    meta.setdefault("source", {"kind": "agent"})
    # The engine stores the validated meta; mirror Meta.validate's defaulting for the raw rows.
    row = {
        "kind": item.type,
        "namespace": item.meta.namespace or "",
        "text": item.render_text(),
        "meta": json.dumps(meta),
        "item": item.model_dump_json(exclude_none=True),
        "confidence": getattr(item, "confidence", None),
        "observed_at": meta.get("observed_at"),
        "source_kind": meta["source"]["kind"],
    }
    return CorpusItem(
        id=item.fingerprint(),
        wire=wire,
        text=row["text"],
        namespace=row["namespace"],
        tags=tuple(item.meta.tags or ()),
        row=row,
    )


def build_corpus(n: int, seed: int = 7) -> list[CorpusItem]:
    """``n`` distinct items (a repeated fingerprint is drawn again), the same for the same seed.

    The items are drawn in order and validated on every core: validation (the service's models and
    fingerprints) is most of the work: at 100k 41 s on one core, 23 s drawing beside two workers.
    """
    generator = Generator(seed)
    items: list[CorpusItem] = []
    seen: set[str] = set()
    index = 0
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        while len(items) < n:
            wanted, start = n - len(items), index
            index += wanted
            # Drawn as the workers validate the chunks already drawn.
            wires = (generator.item(start + k) for k in range(wanted))
            for prepared in pool.map(_prepare, wires, chunksize=max(1, min(1_000, wanted // 8))):
                if prepared.id not in seen and len(items) < n:
                    seen.add(prepared.id)
                    items.append(prepared)
    return items


@dataclass(frozen=True)
class QuerySet:
    """The fetch questions and, per question, the tag and subtree its filtered variants use."""

    questions: list[str]
    tags: list[str]
    subtrees: list[str]


def build_queries(count: int, seed: int = 11) -> QuerySet:
    generator = Generator(seed)
    rng = random.Random(seed)
    roots = subtree_roots()
    return QuerySet(
        questions=[generator.query() for _ in range(count)],
        tags=[rng.choice(TAGS) for _ in range(count)],
        subtrees=[rng.choice(roots) for _ in range(count)],
    )
