"""The explorer at ``/ui`` and the offline API docs at ``/docs`` and ``/redoc`` (docs/explorer.md)."""
