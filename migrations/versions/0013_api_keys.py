"""API keys bound to a reach and a role: ``engram_keys``.

Only the SHA-256 of a key's secret is kept (the secret is a random token of 32 bytes, so a
plain hash is enough and a lookup by it is one index probe). A key is never deleted: revoking
stamps ``revoked_at``, so what it did stays attributable.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE engram_keys (
            id text PRIMARY KEY,
            name text NOT NULL,
            secret_sha256 bytea NOT NULL UNIQUE,
            role text NOT NULL CHECK (role IN ('read', 'write', 'admin')),
            reach_at text NOT NULL,
            reach_inherit boolean NOT NULL,
            reach_descendants boolean NOT NULL,
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_used_at timestamptz,
            revoked_at timestamptz
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE engram_keys")
