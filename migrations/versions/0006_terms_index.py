"""One GIN index over an item's words, tags and namespace lineage: ``engram_items_terms``.

A filtered keyword ranking used to AND two bitmaps: its words' from the ``tsv`` index and
the filter's from the ``tags`` index (or the namespace btree), each as long as its posting
lists. A tag held by 13k of 100k items cost ~3 ms a bitmap, read twice a ranking (the rare
words, then the middle ones), however few of those items held the words. In one GIN index
the scan steps through both keys' posting lists together and keeps only the items holding
both. A subtree becomes a key too: ``lineage`` lists the item's namespace and each ancestor
(``team:acme/agent:a1`` -> ``{team:acme, team:acme/agent:a1}``; the root: ``{}``), so
"``at`` or below" is ``lineage @> {at}``.

At 100k (bench corpus, raw keyword statement, 200 questions, the two schemas interleaved
in one process on a copy, same pages; p50 / p95 ms): with the bench's tags 10.5 / 18.1 ->
7.0 / 11.6, its subtrees 10.7 / 17.4 -> 6.6 / 11.0; the rarest tag (1,915 items) 11.7 /
15.4 -> 6.6 / 10.8, a tag no item has 8.2 / 11.6 -> 3.8 / 6.7, the smallest namespace (649)
10.9 / 15.5 -> 6.4 / 9.7, the broadest subtree (34k) 14.3 / 23.0 -> 10.9 / 16.7; unfiltered
the same. The two indexes it replaces: 7.1 + 0.7 MB; it: 6.9 MB. A subtree stays the
namespace tests everywhere else (app/engine/postgres/filters.py): row by row they are cheaper.
Adding the stored column rewrites the table (~8 s at 100k items).

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION engram_lineage(namespace text) RETURNS text[]
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        RETURN ARRAY(
            SELECT array_to_string((string_to_array(namespace, '/'))[1:n], '/')
            FROM generate_series(1, cardinality(string_to_array(namespace, '/'))) AS n
            ORDER BY n
        )
        """
    )
    op.execute(
        "ALTER TABLE engram_items ADD COLUMN lineage text[] NOT NULL "
        "GENERATED ALWAYS AS (engram_lineage(namespace)) STORED"
    )
    # Built in memory when it fits, many times faster than on disk.
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    # A short pending list, as migration 0003 gave the indexes this one replaces.
    op.execute(
        "CREATE INDEX engram_items_terms ON engram_items USING gin (tsv, tags, lineage) "
        "WITH (gin_pending_list_limit = 128)"
    )
    op.execute("DROP INDEX engram_items_tsv")
    op.execute("DROP INDEX engram_items_tags")


def downgrade() -> None:
    op.execute("CREATE INDEX engram_items_tags ON engram_items USING gin (tags) WITH (gin_pending_list_limit = 128)")
    op.execute("CREATE INDEX engram_items_tsv ON engram_items USING gin (tsv) WITH (gin_pending_list_limit = 128)")
    op.execute("DROP INDEX engram_items_terms")
    op.execute("ALTER TABLE engram_items DROP COLUMN lineage")
    op.execute("DROP FUNCTION engram_lineage(text)")
