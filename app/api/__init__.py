"""The HTTP layer: translates between the wire and an engine; knows no SQL."""
