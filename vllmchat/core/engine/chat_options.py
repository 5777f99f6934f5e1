"""What a turn asks beyond its messages and sampling: images, tools, a constrained reply.

One value, from the caller through the engine (local or remote) to the engine
process's decode loop, so the list of a turn's extras is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vllmchat.core.engine.images import ImageInput


@dataclass(frozen=True)
class ChatOptions:
    """A turn's extras; the default asks for none of them."""

    images: Sequence[ImageInput] = ()  # one per MEDIA_MARKER in the messages, in order
    tools: str | None = None  # OpenAI's tools list (JSON) for a template with a tool format
    json_schema: str | None = None  # the reply must fit this JSON Schema (a constrained call)
    grammar: str | None = None  # or this GBNF grammar (llama.cpp's own format)
    raw: bool = False  # the one message's content is the whole prompt (a completion)

    @property
    def constrained(self) -> bool:
        """The reply is held to a JSON Schema or a grammar."""
        return bool(self.json_schema or self.grammar)


PLAIN = ChatOptions()
"""A turn of text alone."""
