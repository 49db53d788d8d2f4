"""``engram eval``: retrieval quality of a running service, measured on a labelled set."""
