"""Items, their per-model embeddings and the service's own settings.

Revision ID: 0001
Revises:
"""

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    attributes = context.config.attributes
    dimension = int(attributes.get("embedding_dim", 256))
    ts_config = attributes.get("text_search_config", "english")
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        """
        CREATE TABLE engram_settings (
            key text PRIMARY KEY,
            value text NOT NULL
        )
        """
    )
    op.execute(
        f"""
        INSERT INTO engram_settings (key, value) VALUES
            ('text_search_config', '{ts_config}'),
            ('embedding_dim', '{dimension}')
        """
    )
    # One row per item, keyed by its fingerprint. ``seq`` is the immutable
    # insertion order that list pages by; ``item`` keeps the whole canonical
    # item so nothing the client sent is lost; the filterable meta fields
    # live in ``meta`` (GIN, containment) or in columns of their own.
    op.execute(
        f"""
        CREATE TABLE engram_items (
            id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{{40}}$'),
            seq bigint GENERATED ALWAYS AS IDENTITY,
            kind text NOT NULL CHECK (kind IN ('document', 'conversation', 'learning')),
            namespace text COLLATE "C" NOT NULL,
            text text NOT NULL,
            meta jsonb NOT NULL,
            item jsonb NOT NULL,
            confidence double precision,
            observed_at timestamptz,
            tags text[] NOT NULL DEFAULT '{{}}',
            source_kind text NOT NULL,
            stored_at timestamptz NOT NULL DEFAULT now(),
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('{ts_config}'::regconfig, text)) STORED
        )
        """
    )
    op.execute("CREATE UNIQUE INDEX engram_items_seq ON engram_items (seq)")
    op.execute("CREATE INDEX engram_items_namespace ON engram_items (namespace, seq)")
    op.execute("CREATE INDEX engram_items_kind ON engram_items (kind, seq)")
    op.execute("CREATE INDEX engram_items_observed_at ON engram_items (observed_at)")
    op.execute("CREATE INDEX engram_items_tags ON engram_items USING gin (tags)")
    op.execute("CREATE INDEX engram_items_meta ON engram_items USING gin (meta jsonb_path_ops)")
    op.execute("CREATE INDEX engram_items_tsv ON engram_items USING gin (tsv)")
    # Vectors are kept per embedding model: switching the model never mixes
    # the vectors of two models, and a re-embed can run beside the old ones.
    op.execute(
        f"""
        CREATE TABLE engram_embeddings (
            item_id text NOT NULL REFERENCES engram_items (id) ON DELETE CASCADE,
            model text NOT NULL,
            embedding vector({dimension}) NOT NULL,
            PRIMARY KEY (item_id, model)
        )
        """
    )
    op.execute("CREATE INDEX engram_embeddings_hnsw ON engram_embeddings USING hnsw (embedding vector_cosine_ops)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS engram_embeddings")
    op.execute("DROP TABLE IF EXISTS engram_items")
    op.execute("DROP TABLE IF EXISTS engram_settings")
