"""WordLlama, loaded offline from the files its wheel ships.

``WordLlama.load`` may try to download the tokenizer, so the bundled tokenizer
and weights are read directly: the service never touches the network.
"""

from __future__ import annotations

from importlib import resources

import anyio.to_thread
import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer
from wordllama.inference import WordLlamaInference

from app.contract.errors import ConfigError

_TOKENIZER = "l2_supercat_tokenizer_config.json"
_WEIGHTS = "l2_supercat_256.safetensors"
_FULL_DIMENSION = 256
# Below this many texts the thread hop costs more than it saves.
_OFF_LOOP_THRESHOLD = 8


class WordLlamaEmbedder:
    """Static token embeddings, mean-pooled and normalised; fast on a CPU."""

    def __init__(self, dimension: int = _FULL_DIMENSION) -> None:
        if dimension not in (64, 128, 256):
            # WordLlama's matryoshka weights truncate cleanly at these sizes only.
            raise ConfigError(f"wordllama dimension must be 64, 128 or 256, got {dimension}")
        package = resources.files("wordllama")
        tokenizer = Tokenizer.from_file(str(package / "tokenizers" / _TOKENIZER))
        with safe_open(str(package / "weights" / _WEIGHTS), framework="np", device="cpu") as weights:
            table = weights.get_tensor("embedding.weight")[:, :dimension]
        self._model = WordLlamaInference(table, tokenizer)
        self._dimension = dimension
        self._fallback = np.full(dimension, 1.0 / np.sqrt(dimension), dtype=np.float32)

    @property
    def name(self) -> str:
        return f"wordllama-l2-supercat-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_sync(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = np.asarray(self._model.embed(texts, norm=False), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # A text with no known token pools to zero; give it a fixed unit vector
        # so cosine distance stays defined.
        empty = norms[:, 0] == 0
        vectors[empty] = self._fallback
        norms[empty] = 1.0
        return (vectors / norms).tolist()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if len(texts) < _OFF_LOOP_THRESHOLD:
            return self.embed_sync(texts)
        return await anyio.to_thread.run_sync(self.embed_sync, texts)
