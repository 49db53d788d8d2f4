"""The memory contract in Python: pure data and rules, no I/O."""
