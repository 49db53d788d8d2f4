"""A write in one round trip: ``engram_write_items``.

A store was a transaction of six round trips (BEGIN, the locks, the drop of expired copies, the
insert, the vectors into the backlog, COMMIT); at 16 concurrent clients the database's time per
store bounded the service's writes (docs/tuning.md#one-round-trip-writes). This function takes the
same steps, called as one statement: its own transaction, atomic, committed (and flushed) before
it answers. It is VOLATILE, so each step reads a snapshot taken after the steps before it (after
the locks were granted), as the separate statements of the transaction did: the insert reads the
retention policies as they are once their shared lock is held.

The items are inserted first; only those already held (a replay, or an expired copy) go on to the
drop of expired copies and a second insert. A new item, the usual write, costs no delete: no copy
of it is there to be expired, as the insert that met no conflict proves.

Its steps repeat app/engine/postgres/queries/writes.py's rules and the expiry of
queries/retention.py ``expiry_sql``, frozen here as migrations are: the engine's tests compare the
expiry a write gives with the one a policy change computes.

An item inserted without a vector (held when the write began, forgotten since) would be found by
no vector search: the function refuses that with SQLSTATE EG001 and nothing is written; the engine
embeds it and writes again (app/engine/postgres/engine.py).

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION engram_write_items(
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
    )


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION engram_write_items(text[], text[], text[], text[], text[], text[], float8[], text[], text[], "
        "timestamptz[], text, text[], vector[], boolean)"
    )
