"""Any OpenAI-compatible ``/v1/embeddings`` endpoint: OpenAI, Ollama, Text Embeddings Inference, vLLM, LM Studio.

One ``httpx.AsyncClient`` for the process: texts go in batches of ``embedding_batch_size``, at most
``embedding_concurrency`` requests in flight across every call (a shared semaphore), each bounded by
``embedding_timeout_s``. An overloaded or unreachable endpoint (429, 5xx, a refused connection, a
timeout) is retried with capped exponential backoff, honouring ``Retry-After``; when the retries are
spent the call raises ``Unavailable`` (503, retryable), so a write embeds nothing and writes nothing.
An answer that can never succeed (a rejected key, an unknown model, another dimension) is a
``ConfigError`` naming the setting to fix.

Long inputs are cut, not refused: each text is cut to ``MAX_INPUT_CHARS`` characters before it is
sent, since servers differ on what they do with one over the model's window (OpenAI refuses it).
8,000 characters is about 2,000 tokens of English: within the 8,192 of OpenAI's and nomic's models;
a 512-token model (bge, e5) still needs its server to truncate the rest (Ollama does by default, Text
Embeddings Inference with ``--auto-truncate``), and a 413 says so. What a model would not read anyway
is not worth an error.

Neither the key nor a password in the URL ever reaches a message or a log line: the key is sent only
as a bearer header, a URL's user and password are taken out of the base URL and sent as basic auth,
and a server's message is sanitised, stripped of the key and cut short before it is repeated.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import math
import random
import time
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from app.contract.errors import ConfigError, EngramError, Unavailable, sanitise, shortened
from app.embeddings.prefixes import prefixes_for

if TYPE_CHECKING:
    from app.settings import Settings

# Each text is cut to this many characters before it is sent (about 2,000 tokens; see the module docstring).
MAX_INPUT_CHARS = 8_000
# Backoff before retry n (from 0): BACKOFF_S * 2**n, scaled by a random factor in [0.5, 1] so clients
# that failed together do not retry together; no wait, Retry-After included, is longer than MAX_WAIT_S.
BACKOFF_S = 0.5
MAX_WAIT_S = 10.0
# How much of a server's refusal a ConfigError repeats.
MESSAGE_CHARS = 200
UNAVAILABLE = "the embedding endpoint is unavailable or overloaded, retry shortly"
# Messages are sanitised, which takes out anything shaped like a url: the example is in words.
_NOT_A_BASE = "ENGRAM_EMBEDDING_URL must be the http or https api base, the part before /embeddings"


class _Retry(Exception):
    """A transient failure of one request; ``wait_s`` is the server's Retry-After, if it sent one."""

    def __init__(self, wait_s: float | None = None) -> None:
        super().__init__("transient embedding endpoint failure")
        self.wait_s = wait_s


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible endpoint, normalised here since not every server does."""

    def __init__(
        self,
        url: str,
        model: str,
        dimension: int,
        *,
        key: str | None = None,
        timeout_s: float = 30.0,
        batch_size: int = 64,
        concurrency: int = 4,
        retries: int = 4,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        backoff_s: float = BACKOFF_S,
        max_wait_s: float = MAX_WAIT_S,
        max_input_chars: int = MAX_INPUT_CHARS,
    ) -> None:
        base, auth = _split_credentials(url)
        self._model = model
        self._dimension = dimension
        self._key = key or None
        self._batch_size = batch_size
        self._retries = retries
        self._backoff_s = backoff_s
        self._max_wait_s = max_wait_s
        self._max_input_chars = max_input_chars
        default_query, default_document = prefixes_for(model)
        self._query_prefix = default_query if query_prefix is None else query_prefix
        self._document_prefix = default_document if document_prefix is None else document_prefix
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.AsyncClient(
            base_url=base,
            auth=None if self._key else auth,
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._in_flight = asyncio.Semaphore(concurrency)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIEmbedder:
        if not settings.embedding_url or not settings.embedding_model or settings.embedding_dim is None:
            raise ConfigError(
                "the openai embedder needs ENGRAM_EMBEDDING_URL, ENGRAM_EMBEDDING_MODEL and ENGRAM_EMBEDDING_DIM"
            )
        return cls(
            settings.embedding_url,
            settings.embedding_model.strip(),
            settings.embedding_dim,
            key=settings.embedding_key.get_secret_value() if settings.embedding_key else None,
            timeout_s=settings.embedding_timeout_s,
            batch_size=settings.embedding_batch_size,
            concurrency=settings.embedding_concurrency,
            retries=settings.embedding_retries,
            query_prefix=settings.embedding_query_prefix,
            document_prefix=settings.embedding_document_prefix,
        )

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    @property
    def dimension(self) -> int:
        return self._dimension

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._embed(texts, self._document_prefix)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._embed(texts, self._query_prefix)

    async def aclose(self) -> None:
        """Close the client's connections (the service does on shutdown)."""
        await self._client.aclose()

    async def _embed(self, texts: list[str], prefix: str) -> np.ndarray:
        """Every batch at once (the semaphore bounds them); the first failure cancels the rest."""
        if not texts:
            return np.empty((0, self._dimension), dtype=np.float32)
        inputs = [prefix + text[: self._max_input_chars] for text in texts]
        batches = [inputs[i : i + self._batch_size] for i in range(0, len(inputs), self._batch_size)]
        if len(batches) == 1:
            return await self._batch(batches[0])
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._batch(batch)) for batch in batches]
        except BaseExceptionGroup as failed:
            raise _first(failed) from None
        return np.concatenate([task.result() for task in tasks])

    async def _batch(self, inputs: list[str]) -> np.ndarray:
        """One batch's unit vectors, retried while the endpoint is down or overloaded."""
        for attempt in range(self._retries + 1):
            try:
                async with self._in_flight:
                    return await self._request(inputs)
            except _Retry as transient:
                if attempt == self._retries:
                    break
                await asyncio.sleep(self._wait_s(attempt, transient.wait_s))
        raise Unavailable(UNAVAILABLE)

    def _wait_s(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, self._max_wait_s)
        return min(self._backoff_s * 2**attempt, self._max_wait_s) * random.uniform(0.5, 1.0)

    async def _request(self, inputs: list[str]) -> np.ndarray:
        body = {"model": self._model, "input": inputs, "encoding_format": "float"}
        try:
            response = await self._client.post("embeddings", json=body)
        except httpx.TransportError:  # refused, reset, timed out
            raise _Retry() from None
        if response.status_code == 429 or response.status_code >= 500:
            raise _Retry(_retry_after_s(response.headers.get("retry-after")))
        if response.status_code >= 400:
            raise self._refusal(response)
        return self._vectors(response, len(inputs))

    def _refusal(self, response: httpx.Response) -> ConfigError:
        """A 4xx other than 429: retrying cannot help, the settings must change."""
        status = response.status_code
        if status in (401, 403):
            return ConfigError(f"the embedding endpoint refused the credential ({status}): check ENGRAM_EMBEDDING_KEY")
        if status == 404:
            return ConfigError(
                "the embedding endpoint answered 404: check ENGRAM_EMBEDDING_URL (the api base, the part before "
                "/embeddings) and ENGRAM_EMBEDDING_MODEL"
            )
        said = self._server_message(response)
        if status == 413:
            return ConfigError(
                "the embedding endpoint refused the request as too large (413): let the server truncate long inputs "
                f"(text embeddings inference: --auto-truncate) or lower ENGRAM_EMBEDDING_BATCH_SIZE; it said: {said}"
            )
        return ConfigError(f"the embedding endpoint refused the request ({status}): {said}")

    def _server_message(self, response: httpx.Response) -> str:
        """The server's own words (OpenAI, TEI and Ollama each shape their error differently), made safe."""
        try:
            payload: Any = response.json()
        except ValueError:
            payload = response.text
        message = payload
        if isinstance(payload, dict):
            error = payload.get("error", payload.get("message", payload))
            message = error.get("message", error) if isinstance(error, dict) else error
        text = str(message)
        if self._key:
            text = text.replace(self._key, "<redacted>")
        return shortened(sanitise(text), MESSAGE_CHARS) or "no message"

    def _vectors(self, response: httpx.Response, count: int) -> np.ndarray:
        """The answer's rows in input order (by their ``index``), each of the configured dimension, unit length."""
        try:
            rows = sorted(response.json()["data"], key=lambda row: int(row["index"]))
            vectors = [_floats(row["embedding"]) for row in rows]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(
                "the embedding endpoint's answer is not an embeddings list: check ENGRAM_EMBEDDING_URL"
            ) from None
        if len(vectors) != count:
            raise ConfigError(f"the embedding endpoint gave {len(vectors)} vectors for {count} texts")
        wrong = next((len(v) for v in vectors if len(v) != self._dimension), None)
        if wrong is not None:
            raise ConfigError(
                f"the model {self._model} gives {wrong} dimensions but ENGRAM_EMBEDDING_DIM is {self._dimension}"
            )
        matrix = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.ascontiguousarray(matrix / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def _floats(embedding: Any) -> np.ndarray:
    """A row as floats; a server that ignores ``encoding_format`` may still send base64 float32."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype=np.float32)
    if not isinstance(embedding, list):
        raise TypeError("an embedding is a list of numbers")
    return np.asarray(embedding, dtype=np.float32)


def _split_credentials(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """The API base without user and password (so no log line or error can carry them), and those as basic auth."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError):
        raise ConfigError(_NOT_A_BASE) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(_NOT_A_BASE)
    auth = httpx.BasicAuth(parsed.username, parsed.password) if parsed.username or parsed.password else None
    base = parsed.copy_with(username=None, password=None)
    # A trailing slash, so "embeddings" joins under the base's path rather than replacing its last segment.
    return str(base).rstrip("/") + "/", auth


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    """The error to raise for a failed set of batches: a contract error if any batch raised one."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop(0)
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
        else:
            leaves.append(error)
    return next((error for error in leaves if isinstance(error, EngramError)), leaves[0])
