"""Instruction prefixes by model family, shared by every encoder.

Retrieval models such as bge, e5 or nomic were trained with a prefix before a query (and some before a
document); without it they rank worse (bge-small's, measured: docs/tuning.md#thread-context). The same
model served locally (onnx.py) or behind an endpoint (openai.py) needs the same prefixes, so they are
listed here once.
"""

from __future__ import annotations

# The instruction prefixes (query, document) that retrieval models were trained with, by a
# fragment of their name; a model not listed takes none. ENGRAM_EMBEDDING_*_PREFIX overrides.
_RETRIEVAL_PROMPT = "Represent this sentence for searching relevant passages: "
PREFIXES: dict[str, tuple[str, str]] = {
    "bge-small-en-v1.5": (_RETRIEVAL_PROMPT, ""),
    "bge-base-en-v1.5": (_RETRIEVAL_PROMPT, ""),
    "bge-large-en-v1.5": (_RETRIEVAL_PROMPT, ""),
    "mxbai-embed": (_RETRIEVAL_PROMPT, ""),
    "snowflake-arctic-embed": (_RETRIEVAL_PROMPT, ""),
    "e5-": ("query: ", "passage: "),
    "nomic-embed-text": ("search_query: ", "search_document: "),
}


def prefixes_for(model: str) -> tuple[str, str]:
    """The (query, document) prefixes a model expects: ``("", "")`` for a symmetric model."""
    lowered = model.lower()
    return next((pair for fragment, pair in PREFIXES.items() if fragment in lowered), ("", ""))
