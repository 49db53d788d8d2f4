"""``python -m tests.support.llama_server ARGS``: llama-cpp-python's OpenAI-compatible server, ggml's AMX kernels off.

These machines' CPUs report AMX, and llama.cpp built for them (``-march=native``) places weights in its
AMX buffer type, but the VM does not let a thread use the tile registers: the first ``ldtilecfg`` in a
worker thread segfaults. Turning the extra buffer types off (``use_extra_bufts``, which llama-cpp-python
does not expose as a setting) keeps every weight in plain CPU memory and every matmul off AMX.
"""

from __future__ import annotations

import runpy
from typing import Any

import llama_cpp.llama_cpp as bindings

_defaults = bindings.llama_model_default_params


def _without_extra_buffer_types() -> Any:
    params = _defaults()
    params.use_extra_bufts = False
    return params


if __name__ == "__main__":
    bindings.llama_model_default_params = _without_extra_buffer_types
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
