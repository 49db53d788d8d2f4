"""What the service tells its operators: Prometheus metrics and log lines (docs/operations.md)."""
