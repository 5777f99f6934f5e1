"""The engine process's side: what runs only in the child that holds llama.cpp.

``llama``: llama-cpp-python's one adapter and llama.cpp's own parts; ``inference``:
the runtime, decoding, speculation, draft models, scoring; ``serving``: the worker,
its request registry and handlers. The client side (``vllmchat.core.engine``)
never imports these, only ``serving.entry`` to spawn the child.
"""
