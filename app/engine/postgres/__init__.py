"""The PostgreSQL engine: keyword by tsvector, vector by pgvector, hybrid by rank fusion."""
