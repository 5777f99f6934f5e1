"""A reply streamed and stored as it comes: the partial message written first, saved
every second while it streams, completed (or kept partial, or taken back) at its end,
with the passages it was given and its tool steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace

from vllmchat.core.attachments.model import ChunkHit
from vllmchat.core.conversations.events import (
    MessageStored,
    PassagesUsed,
    PromptPlanEvent,
    ReplyEvent,
)
from vllmchat.core.conversations.store.attachment_list import AttachmentList
from vllmchat.core.conversations.store.store import ConversationStore
from vllmchat.core.conversations.store.tool_prompts import StepPrompt, ToolPromptList
from vllmchat.core.conversations.store.tool_steps import ToolStepList
from vllmchat.core.conversations.turns.reply_parts import ReplyParts
from vllmchat.core.conversations.turns.session_config import SessionConfig
from vllmchat.core.engine.chat_options import ChatOptions
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, Event
from vllmchat.core.engine.protocol import Engine
from vllmchat.core.tools.events import (
    ApprovalNeeded,
    ServerStatus,
    ToolCallFinished,
    ToolEvent,
    ToolResult,
    ToolStepPrompted,
)

SAVE_EVERY_S = 1.0


class ReplyWriter:
    """Writes one conversation's replies as they stream (``clock``: seconds)."""

    def __init__(
        self,
        store: ConversationStore,
        client: Engine,
        conversation_id: int,
        attachments: AttachmentList,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.client, self.conversation_id = store, client, conversation_id
        self._attachments, self._clock = attachments, clock

    def stream(
        self,
        config: SessionConfig,
        prompt: list[dict[str, str]],
        plan: PromptPlanEvent,
        hits: list[ChunkHit],
        images: list[bytes],
    ) -> Iterator[ReplyEvent | MessageStored | PassagesUsed]:
        """Stream and store the reply (the images go with every step of a tool turn)."""
        room = plan.n_ctx - plan.prompt_tokens
        sampling = replace(
            config.sampling, max_tokens=max(1, min(config.sampling.max_tokens, room))
        )
        reply = self.store.add_message(
            self.conversation_id,
            "assistant",
            "",
            partial=True,
            model=config.model_name,
            settings=asdict(sampling),
        )
        yield MessageStored(reply.id, "assistant")
        if hits:
            self._attachments.record_used(reply.id, hits)
            yield PassagesUsed(reply.id, tuple(hits))
        parts = ReplyParts(self.client.info)
        saved_at = self._clock()
        stream: Iterator[Event | ToolEvent]
        tool_stream = config.tool_stream
        if tool_stream is not None:
            stream = tool_stream(prompt, sampling, images)
        elif images:
            stream = self.client.chat(prompt, sampling, ChatOptions(images=images))
        else:
            stream = self.client.chat(prompt, sampling)
        held: DoneEvent | None = None  # a step's end: the turn's when nothing follows it
        steps: list[ToolResult] = []
        prompted: list[StepPrompt] = []  # the steps as the model was given them
        for raw in stream:
            held = None
            if isinstance(raw, ToolStepPrompted):
                prompted.append(StepPrompt(raw.messages, raw.reply_ids))
                continue
            if isinstance(raw, ToolCallFinished):
                steps.append(raw.result)
            if isinstance(raw, ServerStatus | ApprovalNeeded | ToolCallFinished):
                yield raw  # a tool step; the stored reply is the model's last step
                parts = ReplyParts(self.client.info)
                continue
            for event in parts.pass_on(raw):
                if isinstance(event, DoneEvent):
                    stats = asdict(event.stats)
                    if parts.thinking:
                        stats["thinking_s"] = round(parts.seconds, 1)
                    self.store.update_message(
                        reply.id,
                        content=event.text,
                        thinking=parts.thinking,
                        partial=event.stop_reason == "stopped",
                        token_ids=event.token_ids,
                        tokens=len(event.token_ids),
                        stats=stats,
                    )
                elif isinstance(event, ErrorEvent):
                    if event.partial_text or parts.thinking:
                        text, thought = event.partial_text, parts.thinking
                        self.store.update_message(
                            reply.id, content=text, thinking=thought, partial=True
                        )
                    else:
                        self.store.set_leaf(self.conversation_id, reply.parent_id)
                elif self._clock() - saved_at > SAVE_EVERY_S:
                    self.store.update_message(
                        reply.id, content=parts.answer, thinking=parts.thinking
                    )
                    saved_at = self._clock()
                if isinstance(event, DoneEvent) and config.tool_stream is not None:
                    held = event  # one DoneEvent a turn, after its last step
                    continue
                yield event
        if steps:
            ToolStepList(self.store).record(reply.id, steps)  # before the turn's end is told
        if prompted:
            ToolPromptList(self.store).record(reply.id, prompted)
        if held is not None:
            yield held
