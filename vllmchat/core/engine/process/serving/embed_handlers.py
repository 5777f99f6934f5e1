"""The engine's embedding operation (``core/engine/embedding.py``)."""

from __future__ import annotations

from vllmchat.core.engine.embedding import Embed, Vector
from vllmchat.core.engine.process.inference.embedding import embed_texts
from vllmchat.core.engine.process.serving.registry import Context, handles


@handles(Embed)
def embed(ctx: Context, r: Embed) -> list[Vector]:
    """Vectors of the texts, with the chat model's threads when one is loaded."""
    threads = ctx.runtime.settings.n_threads if ctx.runtime is not None else None
    return embed_texts(r.model_path, r.texts, ctx.stop_requested, threads)
