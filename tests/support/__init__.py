"""Helpers the test packages share: processes and servers of their own, scratch databases, a fault proxy.

``processes``: free ports, the ``engram`` command's environment, starting a server and waiting for it.
``scratch``: a PostgreSQL server of the test's own, reached by URL, and items to fill it.
``live``: an ``engram serve`` process and an embedded database it can lose.
``proxy``: a real HTTP hop before a model server that counts, records and injects faults.
``llama_server``: llama-cpp-python's chat server as these machines can run it (``python -m``).
"""
