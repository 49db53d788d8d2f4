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

from app.contract.errors import ConfigError

_TOKENIZER = "l2_supercat_tokenizer_config.json"
_WEIGHTS = "l2_supercat_256.safetensors"
_FULL_DIMENSION = 256
# The matryoshka weights truncate cleanly at these only.
DIMENSIONS = (64, 128, _FULL_DIMENSION)
# Below this many texts the thread hop costs more than it saves.
_OFF_LOOP_THRESHOLD = 8


class WordLlamaEmbedder:
    """Static token embeddings, mean-pooled and normalised; fast on a CPU."""

    def __init__(self, dimension: int = _FULL_DIMENSION) -> None:
        if dimension not in DIMENSIONS:
            raise ConfigError(f"wordllama dimension must be 64, 128 or 256, got {dimension}")
        package = resources.files("wordllama")
        self._tokenizer = Tokenizer.from_file(str(package / "tokenizers" / _TOKENIZER))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        with safe_open(str(package / "weights" / _WEIGHTS), framework="np", device="cpu") as weights:
            self._table = np.ascontiguousarray(weights.get_tensor("embedding.weight")[:, :dimension], dtype=np.float32)
        self._dimension = dimension
        self._fallback = np.full(dimension, 1.0 / np.sqrt(dimension), dtype=np.float32)

    @property
    def name(self) -> str:
        return f"wordllama-l2-supercat-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def pooled(self, texts: list[str]) -> np.ndarray:
        """Each text's mean token vector, the same floats WordLlama's own ``embed`` gives.

        WordLlama pads every text of a batch to the longest and sums the padded array; the
        sums here run over each text's own tokens in the same order (zeros added change no
        float), without the padding, and the tokenizer skips the offsets nobody reads: a
        batch of 100 bench texts embeds in ~12 ms instead of ~22 (tests/embeddings checks
        the vectors are equal to WordLlama's, bit for bit). A text with no token pools to zero.
        """
        encodings = self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        lengths = np.fromiter((len(encoding.ids) for encoding in encodings), dtype=np.int64, count=len(encodings))
        ids = np.fromiter(
            (token for encoding in encodings for token in encoding.ids), dtype=np.int64, count=int(lengths.sum())
        )
        np.clip(ids, 0, self._table.shape[0] - 1, out=ids)  # as WordLlama does, for a tokenizer/table mismatch
        tokens = self._table[ids]
        sums = np.zeros((len(texts), self._dimension), dtype=np.float32)
        ends = np.cumsum(lengths)
        for row, (start, end) in enumerate(zip(ends - lengths, ends, strict=True)):
            if end > start:
                # One text's rows summed in order; np.add.reduceat groups them otherwise (not the same floats).
                sums[row] = tokens[start:end].sum(axis=0, dtype=np.float32)
        return sums / np.maximum(lengths, 1).astype(np.float32)[:, np.newaxis]

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self._dimension), dtype=np.float32)
        vectors = self.pooled(texts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # A text with no known token pools to zero; give it a fixed unit vector
        # so cosine distance stays defined.
        empty = norms[:, 0] == 0
        vectors[empty] = self._fallback
        norms[empty] = 1.0
        return vectors / norms

    async def embed(self, texts: list[str]) -> np.ndarray:
        if len(texts) < _OFF_LOOP_THRESHOLD:
            return self.embed_sync(texts)
        return await anyio.to_thread.run_sync(self.embed_sync, texts)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        """A static model reads a query as it reads a document."""
        return await self.embed(texts)

    async def aclose(self) -> None:
        """Nothing to release: the model lives in this process until it ends."""
