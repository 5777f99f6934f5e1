"""Text embeddings from an embedding GGUF, computed in the engine process.

``Embed`` asks the engine process for one vector per text from the model at
``model_path`` (loaded there beside the chat model, once, with llama.cpp's embedding
mode and mean pooling). It is stoppable: a stop ends it after the text in progress
and the reply holds the vectors computed so far. ``embed`` sends it through any
engine that serves requests (the local engine); a server engine has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from vllmchat.core.engine.requests import Request

Vector = tuple[float, ...]


@dataclass(frozen=True)
class Embed(Request[list[Vector]]):
    """One unit-length vector per text, in order (fewer when stopped)."""

    stoppable: ClassVar[bool] = True
    starts: ClassVar[bool] = True  # the engine process starts for it (no chat model needed)
    model_path: str
    texts: tuple[str, ...]


@runtime_checkable
class ServesRequests(Protocol):
    """An engine that answers typed requests (``EngineClient``)."""

    def call(self, request: Request[Any]) -> Any: ...


def can_embed(engine: object) -> bool:
    """Whether ``engine`` can compute embeddings (the local engine process can)."""
    return isinstance(engine, ServesRequests)


def embed(engine: object, model_path: str, texts: Sequence[str]) -> list[Vector]:
    """The vectors of ``texts`` from the embedding model at ``model_path``."""
    if not isinstance(engine, ServesRequests):
        raise TypeError("this engine computes no embeddings")
    vectors: list[Vector] = engine.call(Embed(model_path, tuple(texts)))
    return vectors
