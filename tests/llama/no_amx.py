"""Turns off llama.cpp's "extra buffer types" before any model loads.

They put Q4_1 weights in llama.cpp's AMX buffer on CPUs that report AMX, and its AMX matmul
dies on some VMs (a general protection fault in libggml-cpu on the first completion).
llama-cpp-python's Llama() reads the model defaults through this module attribute at
construction time, so importing this module first is enough.
"""

import llama_cpp.llama_cpp as C

_default_model_params = C.llama_model_default_params


def _no_extra_bufts():
    params = _default_model_params()
    params.use_extra_bufts = False
    return params


C.llama_model_default_params = _no_extra_bufts
