"""The engine's SQL by query family.

Each module plans ``Statement`` objects from a request's inputs, the planner's statistics and
the options, without a database: the engine runs them, and so does the benchmark's raw-SQL
floor (bench/rawsql.py), which therefore measures the very statements the service sends.
Filters arrive as a predicate over ``engram_items AS i`` (app.engine.postgres.filters).
"""
