"""The engine process's embedding model: loaded at the first request that names it,
kept for the next ones, let go when another is named."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from vllmchat.core.engine.embedding import Vector
from vllmchat.core.engine.events import EngineError, ErrorKind
from vllmchat.core.engine.process.llama.embedder import Embedder

_loaded: list[Embedder] = []  # at most one


def embedder(model_path: str, n_threads: int | None = None) -> Embedder:
    """The embedding model at ``model_path`` (loaded once)."""
    if _loaded and _loaded[0].model_path == model_path:
        return _loaded[0]
    if not os.path.isfile(model_path):
        raise EngineError(ErrorKind.BAD_REQUEST, f"There is no embedding model at {model_path}.")
    release()
    _loaded.append(Embedder(model_path, n_threads))
    return _loaded[0]


def embed_texts(
    model_path: str,
    texts: Sequence[str],
    should_stop: Callable[[], bool],
    n_threads: int | None = None,
) -> list[Vector]:
    """One vector per text; a stop ends it after the text in progress."""
    model = embedder(model_path, n_threads)
    vectors: list[Vector] = []
    for text in texts:
        if should_stop():
            break
        vectors.append(model.embed(text))
    return vectors


def release() -> None:
    """Let the embedding model go."""
    while _loaded:
        _loaded.pop().close()
