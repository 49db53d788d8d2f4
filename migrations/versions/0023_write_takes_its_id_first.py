"""A write takes its transaction id before its first item takes a ``seq``.

The token writer (app/engine/postgres/tokens.py) walks the items by ``seq`` and comes back for those
whose transactions its snapshot counted as in progress. ``seq`` is drawn as a row is inserted, a moment
before PostgreSQL gives the transaction an id for that row: a snapshot taken in that moment did not
count the write at all, and the walk could pass an item committed behind it for good.
``engram_write_items`` now takes its id first (``pg_current_xact_id()``), so every item with a
``seq`` belongs to a transaction any later snapshot counts until it ends. A write that inserts
nothing (a replay) now has an id too, and its commit waits for its WAL like any write's.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# engram_write_items as migration 0018 made it, cut where a first step goes: up to its BEGIN, and after.
OPENING = """
        CREATE OR REPLACE FUNCTION engram_write_items(
            ids text[], kinds text[], nss text[], texts text[], metas text[], items text[], conf float8[],
            obs text[], srcs text[], stored timestamptz[], model text, vector_ids text[], vectors vector[],
            count_backlog boolean
        ) RETURNS TABLE (inserted_ids text[], backlog bigint)
        LANGUAGE plpgsql VOLATILE
        -- One plan a statement a connection, kept: the values change no plan here (ids by primary
        -- key, the policies a small table), and planning every step on every call was a third of
        -- the function's time (docs/tuning.md#one-round-trip-writes).
        SET plan_cache_mode = force_generic_plan
        AS $$
        DECLARE
            written text[] := '{}';
            added text[];
            pending text[] := ids;
        BEGIN
"""
STEPS = """\
            -- The policies shared (a policy change waits for the writes under way), then one lock
            -- per id in one global order (overlapping batches wait for each other, never deadlock).
            PERFORM pg_advisory_xact_lock_shared(hashtext('engram_retention'), 0);
            PERFORM pg_advisory_xact_lock(hashtext('engram_items'), l.h)
            FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(ids) AS k ORDER BY h) AS l;
            FOR attempt IN 1..2 LOOP
                WITH inserted AS (
                    INSERT INTO engram_items
                        (id, kind, namespace, text, meta, item, confidence, observed_at, tags, source_kind,
                         stored_at, expires_at)
                    SELECT t.id, t.kind, t.ns, t.text, t.meta::jsonb, t.item::jsonb, t.conf, t.obs::timestamptz,
                           ARRAY(SELECT jsonb_array_elements_text(coalesce(t.meta::jsonb->'tags', '[]'))), t.src,
                           coalesce(t.stored, now()),
                           (
                            SELECT CASE WHEN bool_or(r.hold) THEN NULL
                                        ELSE (((coalesce(CAST(t.obs AS timestamptz), t.stored, now()))
                                               AT TIME ZONE 'UTC')
                                              + (array_agg(r.span ORDER BY length(r.namespace) DESC)
                                                 FILTER (WHERE r.span IS NOT NULL))[1]
                                             ) AT TIME ZONE 'UTC' END
                            FROM engram_retention r
                            WHERE r.namespace = '' OR r.namespace = t.ns OR starts_with(t.ns, r.namespace || '/')
                           )
                    FROM unnest(ids, kinds, nss, texts, metas, items, conf, obs, srcs, stored)
                         WITH ORDINALITY AS t(id, kind, ns, text, meta, item, conf, obs, src, stored, ord)
                    WHERE t.id = ANY(pending)
                    ORDER BY t.ord
                    ON CONFLICT (id) DO NOTHING
                    RETURNING id
                )
                SELECT coalesce(array_agg(n.id), '{}') INTO added FROM inserted AS n;
                written := written || added;
                pending := ARRAY(SELECT p FROM unnest(pending) AS p WHERE p <> ALL(added));
                EXIT WHEN attempt = 2 OR cardinality(pending) = 0;
                -- Held already: an expired copy is erased, and the item stored anew (with a new
                -- expiry) as once the sweeper had erased it, never a replay of what no read
                -- returns; the insert is tried again for all of them, as the sweeper may have
                -- erased one meanwhile. A new item (the usual write) skips this. Planned for its
                -- values, as the one generic plan would scan every expired item to find a few ids.
                EXECUTE 'DELETE FROM engram_items i WHERE i.id = ANY($1) AND i.expires_at <= now()' USING pending;
            END LOOP;
            IF EXISTS (SELECT 1 FROM unnest(written) AS w WHERE w <> ALL(vector_ids)) THEN
                RAISE EXCEPTION 'an item written lacks its vector' USING ERRCODE = 'EG001';
            END IF;
            INSERT INTO engram_vector_backlog (item_id, model, embedding)
            SELECT v.id, model, v.embedding FROM unnest(vector_ids, vectors) AS v(id, embedding)
            WHERE v.id = ANY(written);
            RETURN QUERY SELECT written,
                CASE WHEN count_backlog THEN (SELECT count(*) FROM engram_vector_backlog) END;
        END
        $$
"""
# The transaction's id, taken before any ``seq`` is (the one its first insert would take a moment later).
TAKES_ID = "            PERFORM pg_current_xact_id();\n"


def upgrade() -> None:
    op.execute(OPENING + TAKES_ID + STEPS)


def downgrade() -> None:
    op.execute(OPENING + STEPS)
