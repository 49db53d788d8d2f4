"""Running the HTTP service under uvicorn: its server process and its connections (docs/operations.md)."""
