"""Stored tool steps put back into a prompt, word for word, before the replies they led to.

A turn with tools prefilled, before its answer, each call as the model sampled it
and the messages that carried the results back. A later turn gives them again in
the same place and the same words, so the engine's KV cache (or a saved state)
still matches the prompt and only the new message is read; the call texts render
as their sampled ids once the engine is told them (``replies``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vllmchat.core.conversations.store.store import ConversationStore, Message
from vllmchat.core.conversations.store.tool_prompts import ToolPromptList


def with_tool_steps(
    store: ConversationStore, path: Sequence[Message], content: Callable[[Message], str]
) -> list[dict[str, str]]:
    """``path`` as prompt messages, each reply preceded by its tool steps."""
    steps = ToolPromptList(store).of_messages(m.id for m in path if m.role == "assistant")
    prompt: list[dict[str, str]] = []
    for m in path:
        for step in steps.get(m.id, ()):
            prompt += [dict(s) for s in step.messages]
        prompt.append({"role": m.role, "content": content(m)})
    return prompt


def step_replies(
    store: ConversationStore, path: Sequence[Message]
) -> list[tuple[str, tuple[int, ...]]]:
    """The calls of ``path``'s tool steps as the model sampled them: (text, ids)."""
    steps = ToolPromptList(store).of_messages(m.id for m in path if m.role == "assistant")
    return [
        (step.messages[0]["content"], step.reply_ids)
        for found in steps.values()
        for step in found
        if step.reply_ids and step.messages and step.messages[0]["role"] == "assistant"
    ]
