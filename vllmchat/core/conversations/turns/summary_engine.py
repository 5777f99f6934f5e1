"""Which engine writes a conversation's summaries: a configured summary server when it
answers, else the loaded model (and why)."""

from __future__ import annotations

from vllmchat.core.engine.events import EngineError
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.settings import LoadSettings


def summary_engine(client: Engine, summarizer: Engine | None) -> tuple[Engine, str]:
    """The engine that writes summaries, and a note when the summary server failed."""
    if summarizer is None:
        return client, ""
    if summarizer.info is None:
        try:
            n_ctx = client.info.n_ctx if client.info else 4096
            summarizer.load(LoadSettings(model_path="", n_ctx=n_ctx))
        except EngineError as exc:
            failed = f"The summary server failed ({exc.message});"
            return client, f"{failed} the loaded model wrote it."
    return summarizer, ""
