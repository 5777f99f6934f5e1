"""An embedding model: a GGUF loaded with llama.cpp's embedding mode (mean pooling)."""

from __future__ import annotations

import math

import llama_cpp

from vllmchat.core.engine.events import EngineError, ErrorKind

EMBED_CTX = 512  # a chunk is about 300 tokens; a longer text is cut at this many


class Embedder:
    """One text at a time to a unit-length vector."""

    def __init__(self, model_path: str, n_threads: int | None = None) -> None:
        self.model_path = model_path
        try:
            self.llm = llama_cpp.Llama(
                model_path=model_path,
                embedding=True,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                n_ctx=EMBED_CTX,
                n_batch=EMBED_CTX,
                n_ubatch=EMBED_CTX,
                n_threads=n_threads,
                n_gpu_layers=0,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise EngineError(
                ErrorKind.BAD_REQUEST,
                f"The embedding model {model_path} cannot be loaded ({exc}).",
            ) from exc
        self.dim = int(self.llm.n_embd())

    def embed(self, text: str) -> tuple[float, ...]:
        """``text``'s vector (cut at ``EMBED_CTX`` tokens), of length 1."""
        raw = self.llm.embed(text or " ", truncate=True)
        vector = raw[0] if raw and isinstance(raw[0], list) else raw
        values = [float(v) for v in vector]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return tuple(v / norm for v in values)

    def close(self) -> None:
        self.llm.close()
