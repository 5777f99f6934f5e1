"""vllmchat: desktop chat for local LLMs on llama.cpp."""

__version__ = "0.1.0"
