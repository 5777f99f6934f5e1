"""How a chat session answers, as one value: its sampling, its context policy, the
model's name on its replies, the engine that writes its summaries, the turn with
tools, and the embedding model that ranks passages.

The application layer builds it from its settings and gives it to the session; a
change is a new value (``changed``) handed to ``ChatSession.configure``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.engine.events import Event
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.settings import SamplingSettings
from vllmchat.core.tools.events import ToolEvent

ToolStream = Callable[
    [list[dict[str, str]], SamplingSettings, Sequence[bytes]], Iterator[Event | ToolEvent]
]
"""A turn with tools: it streams the model's steps and the tool steps between them, as
``Engine.chat`` streams one reply."""


def no_tool_tokens() -> int:
    """No tools are offered: their schemas take no tokens."""
    return 0


@dataclass(frozen=True)
class SessionConfig:
    """Everything about a session that its owner chooses (the rest is its state)."""

    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    policy: ContextPolicy = field(default_factory=ContextPolicy)
    model_name: str = ""  # stored with each reply
    summarizer: Engine | None = None  # another engine that writes the summaries
    tool_stream: ToolStream | None = None  # None: turns without tools
    tool_tokens: Callable[[], int] = no_tool_tokens  # the offered tools' schemas
    embedding_model: str = ""  # an embedding GGUF: passages ranked by FTS5 and vectors

    def changed(self, **changes: Any) -> SessionConfig:
        """This configuration with ``changes`` (field names) made."""
        return replace(self, **changes)

    def with_tools(self, stream: ToolStream, tokens: Callable[[], int]) -> SessionConfig:
        """Turns with tools, counting their schemas in the prompt."""
        return replace(self, tool_stream=stream, tool_tokens=tokens)

    def without_tools(self) -> SessionConfig:
        return replace(self, tool_stream=None, tool_tokens=no_tool_tokens)
