"""Retention policies and legal holds (migration 0015), and each item's expiry under them.

An item's ``expires_at`` is written with it (queries/writes.py WRITE_ITEMS: migration 0018's
function, which repeats ``expiry_sql``) and written again, for the subtree of a namespace, when a
policy or a hold there changes (plan_recompute). A change
holds the policies' advisory lock exclusively for its transaction, and every write takes it
shared before its own locks (writes.WRITE_ITEMS): a write either commits before the change reads
the items, or reads the changed policies, so no item keeps the expiry of a policy gone. Forgets
take it shared too, and the sweeper of expired items only when free (queries/sweeps.py): their
row locks would otherwise meet a change's in other orders.
"""

from __future__ import annotations

from app.contract.namespaces import Namespace, Reach
from app.contract.retention import Ttl
from app.engine.postgres.filters import Predicate, live
from app.engine.postgres.queries.statement import Statement

POLICIES_LOCK = "hashtext('engram_retention'), 0"
POLICIES_SHARED = f"SELECT true FROM pg_advisory_xact_lock_shared({POLICIES_LOCK})"
POLICIES_EXCLUSIVE = f"SELECT pg_advisory_xact_lock({POLICIES_LOCK})"

RECOMPUTE_BATCH = 10_000
"""Items a recompute statement reads at most: each statement stays well inside the statement
timeout however large the subtree (the change is still one transaction)."""


def expiry_sql(namespace: str, start: str) -> str:
    """The expiry of an item at ``namespace`` observed (or stored) at ``start``, both SQL
    expressions: NULL under a hold at or above it, else ``start`` plus the deepest ttl at or above
    it (NULL without one), added in UTC as app/contract/retention.py adds it. A write computes the
    same in migration 0018's function: a change here needs a migration replacing it
    (tests/engine/postgres/test_retention.py compares the two)."""
    return f"""(
        SELECT CASE WHEN bool_or(r.hold) THEN NULL
                    ELSE ((({start}) AT TIME ZONE 'UTC')
                          + (array_agg(r.span ORDER BY length(r.namespace) DESC) FILTER (WHERE r.span IS NOT NULL))[1]
                         ) AT TIME ZONE 'UTC' END
        FROM engram_retention r
        WHERE r.namespace = '' OR r.namespace = {namespace} OR starts_with({namespace}, r.namespace || '/')
    )"""


_COLUMNS = "namespace, ttl, hold, updated_at"


def plan_policies() -> Statement:
    """Every namespace with a policy or a hold, in path order (the root first)."""
    return Statement.bind(f"SELECT {_COLUMNS} FROM engram_retention ORDER BY namespace")


def plan_set_ttl(namespace: Namespace, ttl: Ttl) -> Statement:
    """The ttl at ``namespace``, set or replaced (a hold there stays)."""
    sql = f"""
        INSERT INTO engram_retention (namespace, ttl, span)
        VALUES (:ns, :ttl, make_interval(months => :months) + CAST(:time AS interval))
        ON CONFLICT (namespace) DO UPDATE SET ttl = excluded.ttl, span = excluded.span, updated_at = now()
        RETURNING {_COLUMNS}
    """
    params = {"ns": namespace.path, "ttl": ttl.text, "months": ttl.months, "time": ttl.time}
    return Statement.bind(sql, params)


def plan_clear_ttl(namespace: Namespace) -> Statement:
    """The ttl at ``namespace`` gone (its row too, unless a hold stands there); the row as left, if any."""
    return _unset(namespace, "ttl IS NOT NULL", "ttl = NULL, span = NULL", "NOT hold")


def plan_hold(namespace: Namespace) -> Statement:
    """A legal hold at ``namespace`` (placing one twice changes nothing but the time)."""
    sql = f"""
        INSERT INTO engram_retention (namespace, hold) VALUES (:ns, true)
        ON CONFLICT (namespace) DO UPDATE SET hold = true, updated_at = now()
        RETURNING {_COLUMNS}
    """
    return Statement.bind(sql, {"ns": namespace.path})


def plan_release(namespace: Namespace) -> Statement:
    """The hold at ``namespace`` lifted (its row gone, unless a ttl is set there); the row as left, if any."""
    return _unset(namespace, "hold", "hold = false", "ttl IS NULL")


def _unset(namespace: Namespace, held: str, update: str, empty: str) -> Statement:
    """Unset one part of the row at ``namespace`` when ``held`` says it is set: the row deleted when
    nothing else is set there (``empty``), else updated. One row answers what was there
    (``present``) and, unless deleted, what is left."""
    sql = f"""
        WITH found AS (SELECT namespace FROM engram_retention WHERE namespace = :ns AND {held}),
        dropped AS (
            DELETE FROM engram_retention r USING found f WHERE r.namespace = f.namespace AND {empty} RETURNING 1
        ),
        changed AS (
            UPDATE engram_retention r SET {update}, updated_at = now()
            FROM found f WHERE r.namespace = f.namespace AND NOT ({empty})
            RETURNING r.namespace, r.ttl, r.hold, r.updated_at
        )
        SELECT EXISTS (SELECT 1 FROM found) AS present, c.* FROM (SELECT 1) AS one LEFT JOIN changed c ON true
    """
    return Statement.bind(sql, {"ns": namespace.path})


def plan_recompute(namespace: Namespace, *, after: int, batch: int = RECOMPUTE_BATCH) -> Statement:
    """Write again the expiry of the next ``batch`` items at ``namespace`` and below after ``seq``
    ``after``. One row: ``last``, the last seq read (NULL once none is left), and ``expired``, how
    many items that no read had left out are now expired."""
    subtree = Predicate("r")
    subtree.add_reach(Reach(at=str(namespace), inherit=False, descendants=True))
    sql = f"""
        WITH target AS MATERIALIZED (
            SELECT i.id, i.seq, {expiry_sql("i.namespace", "coalesce(i.observed_at, i.stored_at)")} AS expires_at,
                   {live()} AS was_live
            FROM engram_items i
            WHERE i.seq > :after AND {subtree.sql()}
            ORDER BY i.seq
            LIMIT :batch
        ),
        changed AS (
            UPDATE engram_items i SET expires_at = t.expires_at
            FROM target t
            WHERE i.id = t.id AND i.expires_at IS DISTINCT FROM t.expires_at
            RETURNING t.was_live AND t.expires_at <= now() AS expired
        )
        SELECT (SELECT max(seq) FROM target) AS last, (SELECT count(*) FROM changed WHERE expired) AS expired
    """
    return Statement.bind(sql, {"after": after, "batch": batch, **subtree.params})
