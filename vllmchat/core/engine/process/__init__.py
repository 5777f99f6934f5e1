"""The engine process's side: what runs only in the child that holds llama.cpp.

The runtime and its one llama-cpp-python adapter, decoding and speculation, draft
models, tensor overrides, scoring and the KV state file. The client side
(``vllmchat.core.engine``) never imports these, only ``entry`` to spawn the child.
"""
