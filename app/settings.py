"""All configuration, read once from ``ENGRAM_*`` environment variables."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.contract.limits import DEFAULT_LIMITS, Limits
from app.embeddings.registry import EMBEDDERS
from app.engine.postgres.options import (
    EngineOptions,
    HNSWOptions,
    IndexerOptions,
    LateOptions,
    MirrorOptions,
    PoolOptions,
    ReplicaOptions,
    UndoOptions,
)


def _http_url(value: str) -> bool:
    """An http(s) URL with a host; the value is never repeated (it may carry a password)."""
    try:
        parts = urlsplit(value.strip())
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("engram"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_", env_file=None, extra="ignore")

    # Database: an external server by URL, or the embedded one in data_dir.
    database_url: SecretStr | None = None
    # A streaming replica of that database: fetch, recall, list, get, explore and export read there
    # (app/engine/postgres/replica.py, docs/scaling.md#a-read-replica).
    read_database_url: SecretStr | None = None
    # How long a read that presents an Engram-Position waits for the replica to replay it before the
    # primary answers it.
    read_replica_wait_ms: int = Field(default=ReplicaOptions.wait_ms, ge=0, le=60_000)
    data_dir: Path = Field(default_factory=_default_data_dir)
    # Each of the service's two pools opens up to size + overflow connections as requests need them:
    # docs/tuning.md#processes-and-pooled-connections.
    pool_size: int = Field(default=PoolOptions.size, ge=1)
    pool_overflow: int = Field(default=PoolOptions.overflow, ge=0)
    connect_timeout_s: float = Field(default=PoolOptions.connect_timeout_s, gt=0)
    statement_timeout_ms: int = Field(default=PoolOptions.statement_timeout_ms, ge=1)
    # effective_io_concurrency on the pool that plans statements for their values (filtered searches, lists,
    # writes): docs/tuning.md#read-ahead-under-a-filter.
    custom_plan_io_concurrency: int = Field(default=PoolOptions.custom_plan_io_concurrency, ge=0, le=1_000)
    text_search_config: str = "english"
    # The embedded server's shared_buffers: auto (a quarter of the machine's or its container's memory, at least
    # 128 MB) or a size such as 512MB. Read when the embedded server starts (app/engine/postgres/embedded.py).
    embedded_shared_buffers: str = "auto"

    # Embeddings (docs/search-quality.md): which encoder, and what it needs.
    embedder: str = "bge-small"
    # Unset: the embedder's own (bge-small and minilm 384, wordllama 256; a fastembed model's). Required for openai.
    # At most 4,000: the HNSW index is over half-precision vectors, which pgvector indexes up to there.
    embedding_dim: int | None = Field(default=None, ge=1, le=4_000)
    # A fastembed model name (embedder fastembed) or the endpoint's model (embedder openai).
    embedding_model: str | None = None
    # Cores an onnx encoder call uses (stored texts: that many single-threaded runs at once); unset: every core.
    embedding_threads: int | None = Field(default=None, ge=1)
    # Instruction prefixes; unset: what the model family expects (app/embeddings/prefixes.py).
    embedding_query_prefix: str | None = None
    embedding_document_prefix: str | None = None
    # An OpenAI-compatible /v1/embeddings endpoint (embedder openai), e.g. http://localhost:11434/v1.
    embedding_url: str | None = None
    embedding_key: SecretStr | None = None
    embedding_timeout_s: float = Field(default=30.0, gt=0)
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)
    embedding_concurrency: int = Field(default=4, ge=1, le=64)
    embedding_retries: int = Field(default=4, ge=0, le=20)

    # Re-ranking (docs/search-quality.md#re-ranking): `cross-encoder` reads the question beside each of
    # hybrid's first rerank_depth hits and re-orders them (recall included); `none` leaves the fused order.
    # The depth that found most on the dev split: docs/tuning.md#re-ranking-depth.
    reranker: Literal["none", "cross-encoder"] = "none"
    rerank_depth: int = Field(default=20, ge=2, le=100)
    # Late interaction (docs/search-quality.md#late-interaction): token vectors made for each item after its
    # write, and hybrid's (and recall's) first 30 hits re-scored by them. `auto`: on with bge-small, the
    # encoder its weights were chosen with; off with the others (wordllama is chosen for speed).
    late_interaction: bool | Literal["auto"] = "auto"
    # Vector fetches re-scored too (the index's first 30 by cosine): with late interaction on, vector mode
    # finds more than keyword; false keeps the plain cosine order.
    late_interaction_vector: bool = True

    # Recall answers by a language model (docs/answers-llm.md); off while the URL is unset (extractive only).
    # The API base of an OpenAI-compatible chat server, e.g. http://localhost:11434/v1 (Ollama).
    answer_url: str | None = None
    # The model that server should answer with; required when ENGRAM_ANSWER_URL is set.
    answer_model: str | None = None
    # Sent as a bearer token; never logged or repeated.
    answer_key: SecretStr | None = None
    # A call that takes longer falls back to the extractive answer.
    answer_timeout_s: float = Field(default=20.0, gt=0, le=600)
    # The longest answer the model may write, in tokens.
    answer_max_tokens: int = Field(default=200, ge=16, le=4_096)

    # HNSW candidates per vector search, without and with a filter: recall against latency (a filtered search
    # discards most of its candidates, so it walks wider). Chosen in docs/tuning.md#hnsw-search-breadth.
    # pgvector takes 1..1000 and quietly keeps its default for anything else.
    hnsw_ef_search: int = Field(default=HNSWOptions.ef_search, ge=1, le=1000)
    hnsw_ef_search_filtered: int = Field(default=HNSWOptions.ef_search_filtered, ge=1, le=1000)
    # How a filtered vector search keeps walking the index (pgvector turns a value it does not know off).
    hnsw_iterative_scan: Literal["relaxed_order", "strict_order", "off"] = HNSWOptions.iterative_scan
    # Vectors are indexed after their write is acknowledged (app/engine/postgres/indexer.py) and searched
    # exactly until then; a write that leaves more than this many waiting indexes until it does not.
    # Each waiting vector costs every vector search a little: docs/tuning.md#vector-backlog-limit.
    vector_backlog_limit: int = Field(default=IndexerOptions.backlog_limit, ge=0)
    # Background workers moving queued vectors into the HNSW index, a database connection (and, while
    # there is a backlog, a core) each: docs/tuning.md#vector-indexers.
    vector_indexers: int = Field(default=IndexerOptions.workers, ge=1)
    # Memory (maintenance_work_mem) of the HNSW build a large `engram import` ends with; a graph that
    # outgrows it is built on disk, slower: docs/tuning.md#bulk-index-build.
    index_build_memory_mb: int = Field(default=IndexerOptions.build_memory_mb, ge=64)
    # Memory each service process may give to filter keys' sketches, scanned there instead of in
    # PostgreSQL (app/engine/postgres/mirror.py); 0: none. docs/tuning.md#sketch-mirror.
    sketch_mirror_mb: int = Field(default=MirrorOptions.budget_mb, ge=0)
    # Seconds a forget can be undone (POST /v1/restore with its receipt); 0: a forget is final.
    forget_undo_window_s: float = Field(default=UndoOptions.window_s, ge=0)

    # HTTP.
    api_keys: SecretStr | None = None
    api_keys_file: Path | None = None
    # Serve with no key on an address beyond loopback: every route open to whoever reaches the port.
    # Off, `serve` refuses such an address until a key is set or this says the service is open on purpose.
    allow_open_access: bool = False
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1)
    # A request's head (its request line and every header) and how many headers it may carry; over
    # either is a 431 before anything reads it (app/serving/protocol.py, docs/operations.md).
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    max_headers: int = Field(default=100, ge=1)
    # On SIGTERM, how long requests already accepted may take to finish before they are cut (503).
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    cors_origins: str = ""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # text: one readable line per event; json: one JSON object a line, for a log collector (docs/operations.md).
    log_format: Literal["text", "json"] = "text"
    # Serve GET /metrics without a key, to whoever reaches the port (a scraper on a private network).
    metrics_public: bool = False
    # Traces over OTLP/HTTP (docs/operations.md#traces), named by OpenTelemetry's own variables: on when one
    # names a collector (and engram[tracing] is installed). Read here so a wrong value stops the start; the
    # exporter reads them (and every other OTEL_* variable: headers, service name, sampler) itself.
    otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    )
    otlp_protocol: str | None = Field(
        default=None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
    )
    # As OpenTelemetry reads it: "true" in any case turns tracing off, any other value leaves it on.
    otel_sdk_disabled: str = Field(default="", validation_alias="OTEL_SDK_DISABLED")

    # Item and request limits (contract §9); their defaults are app/contract/limits.py's.
    max_text_chars: int = Field(default=DEFAULT_LIMITS.max_text_chars, ge=1)
    max_query_chars: int = Field(default=DEFAULT_LIMITS.max_query_chars, ge=1)
    max_tags: int = Field(default=DEFAULT_LIMITS.max_tags, ge=1)
    max_tag_chars: int = Field(default=DEFAULT_LIMITS.max_tag_chars, ge=1)
    max_field_chars: int = Field(default=DEFAULT_LIMITS.max_field_chars, ge=1)
    max_turns: int = Field(default=DEFAULT_LIMITS.max_turns, ge=1)
    max_id_chars: int = Field(default=DEFAULT_LIMITS.max_id_chars, ge=1)

    @field_validator("database_url", "read_database_url", mode="before")
    @classmethod
    def _postgresql_url(cls, value: Any) -> Any:
        """Empty is unset (the embedded server; no replica); anything else a URL the driver can read. Refused
        here, named by its variable, rather than as a driver's traceback once the service starts."""
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if text is None or (isinstance(text, str) and not text.strip()):
            return None
        try:
            url = make_url(str(text))
            _ = url.port  # a port that is not a number fails here
        except (ArgumentError, ValueError):
            url = None
        if url is None or url.get_backend_name() not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// url, such as postgresql://user:password@host:5432/name")
        return value

    @field_validator("data_dir")
    @classmethod
    def _a_directory(cls, value: Path) -> Path:
        value = value.expanduser()  # as a shell would, for a value quoted in a .env file
        if value.exists() and not value.is_dir():
            raise ValueError("must be a directory, and it names a file")
        return value

    @field_validator("api_keys_file")
    @classmethod
    def _a_readable_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.expanduser().is_file():
            raise ValueError("names no file this process can read")
        return value.expanduser() if value is not None else None

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _what_the_embedder_needs(self) -> Settings:
        # Checked before anything is made: a schema made for a dimension no embedder gives is refused
        # at every later start.
        choice = EMBEDDERS.get(self.embedder)
        if choice is None:
            raise ValueError(f"ENGRAM_EMBEDDER must be one of {', '.join(EMBEDDERS)}")
        if self.embedding_dim is not None and choice.dimensions and self.embedding_dim not in choice.dimensions:
            given = ", ".join(map(str, choice.dimensions))
            raise ValueError(f"ENGRAM_EMBEDDING_DIM must be one of {given} for {self.embedder}")
        if choice.needs_model and not (self.embedding_model or "").strip():
            raise ValueError(f"ENGRAM_EMBEDDING_MODEL must name the model for the {self.embedder} embedder")
        if choice.needs_url and not _http_url(self.embedding_url or ""):
            raise ValueError(
                f"ENGRAM_EMBEDDING_URL must be the endpoint's http or https api base for the {self.embedder} embedder"
            )
        if choice.needs_url and self.embedding_dim is None:
            raise ValueError(f"ENGRAM_EMBEDDING_DIM must give the model's dimension for the {self.embedder} embedder")
        return self

    @field_validator("answer_url", "answer_model", "otlp_endpoint", "otlp_protocol", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # An empty variable in a .env file or a compose file means "off", not "an empty url".
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _what_the_answerer_needs(self) -> Settings:
        # Checked at start: a wrong endpoint would otherwise only show as every answer falling back.
        if self.answer_url is None:
            return self
        if not _http_url(self.answer_url):
            raise ValueError("ENGRAM_ANSWER_URL must be the chat server's http or https api base, with a host")
        if not (self.answer_model or "").strip():
            raise ValueError("ENGRAM_ANSWER_MODEL must name the model when ENGRAM_ANSWER_URL is set")
        return self

    @model_validator(mode="after")
    def _a_collector_tracing_can_reach(self) -> Settings:
        # Only OTLP over HTTP with protobuf is installed (engram[tracing]); a gRPC collector is refused by name.
        if self.otlp_endpoint is None:
            return self
        if not _http_url(self.otlp_endpoint):
            raise ValueError(
                "OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT must be the collector's http or https url, with a host"
            )
        if self.otlp_protocol not in (None, "http/protobuf"):
            raise ValueError("OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: only http/protobuf is supported (engram[tracing])")
        return self

    @property
    def tracing(self) -> bool:
        """Traces are exported: a collector is named and OTEL_SDK_DISABLED does not turn the SDK off."""
        return self.otlp_endpoint is not None and self.otel_sdk_disabled.strip().lower() != "true"

    @field_validator("text_search_config")
    @classmethod
    def _plain_identifier(cls, value: str) -> str:
        # It is spliced into DDL, so only a bare identifier is accepted.
        if not value.replace("_", "").isalnum():
            raise ValueError("text_search_config must be a plain identifier such as english or simple")
        return value

    @property
    def late_interaction_on(self) -> bool:
        """Whether items get token vectors and the first hits are re-scored by them."""
        if self.late_interaction == "auto":
            return self.embedder == "bge-small"
        return self.late_interaction

    @property
    def limits(self) -> Limits:
        return Limits(**{limit.name: getattr(self, limit.name) for limit in fields(Limits)})

    @property
    def engine_options(self) -> EngineOptions:
        """The PostgreSQL engine's options from these settings; the rest keep their defaults."""
        return EngineOptions(
            pool=PoolOptions(
                size=self.pool_size,
                overflow=self.pool_overflow,
                connect_timeout_s=self.connect_timeout_s,
                statement_timeout_ms=self.statement_timeout_ms,
                custom_plan_io_concurrency=self.custom_plan_io_concurrency,
            ),
            hnsw=HNSWOptions(
                ef_search=self.hnsw_ef_search,
                ef_search_filtered=self.hnsw_ef_search_filtered,
                iterative_scan=self.hnsw_iterative_scan,
            ),
            indexer=IndexerOptions(
                backlog_limit=self.vector_backlog_limit,
                workers=self.vector_indexers,
                build_memory_mb=self.index_build_memory_mb,
            ),
            undo=UndoOptions(window_s=self.forget_undo_window_s),
            replica=ReplicaOptions(wait_ms=self.read_replica_wait_ms),
            late=LateOptions(vector=self.late_interaction_vector),
            mirror=MirrorOptions(budget_mb=self.sketch_mirror_mb),
        )

    def api_key_list(self) -> list[str]:
        """Keys from ``ENGRAM_API_KEYS`` (comma-separated) and ``ENGRAM_API_KEYS_FILE`` (one a line)."""
        keys: list[str] = []
        if self.api_keys is not None:
            keys += [k.strip() for k in self.api_keys.get_secret_value().split(",")]
        if self.api_keys_file is not None:
            keys += [k.strip() for k in self.api_keys_file.read_text().splitlines()]
        return [k for k in keys if k and not k.startswith("#")]

    @model_validator(mode="after")
    def _a_key_list_names_a_key(self) -> Settings:
        # Set but empty (a variable that expanded to nothing, a file of comments) is a mistake, not
        # "no authentication": failing here keeps it from opening every route.
        if (self.api_keys is not None or self.api_keys_file is not None) and not self.api_key_list():
            raise ValueError(
                "ENGRAM_API_KEYS(_FILE) is set but holds no key: give at least one, or unset it to serve without keys"
            )
        return self

    @model_validator(mode="after")
    def _keys_a_header_can_carry(self) -> Settings:
        # HTTP headers are read as latin-1: a key with other characters could never be presented.
        if any(not key.isascii() or not key.isprintable() for key in self.api_key_list()):
            raise ValueError("ENGRAM_API_KEYS(_FILE): a key must be printable ascii (http headers carry it)")
        return self

    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]
