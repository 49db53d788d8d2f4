"""The memory contract in Python: pure data and rules, no I/O.

Section numbers cited as "contract §N" across the code refer to docs/contract.md.
"""
