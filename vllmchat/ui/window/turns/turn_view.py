"""A turn as the window shows it: the message sent, the reply streamed, the prompt's
plan and summaries, the statistics, and what a failed turn leaves (nothing typed is
lost: a message the store never took goes back into the input box)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QInputDialog, QStatusBar, QWidget

from vllmchat.core.app.conversations.service import Conversations
from vllmchat.core.app.events import TurnStarted
from vllmchat.core.conversations.events import MessageStored, PromptPlanEvent, SummaryEvent
from vllmchat.core.engine.events import DoneEvent, ErrorEvent, ErrorKind, TurnStats
from vllmchat.ui.chat.chat_input import ChatInput
from vllmchat.ui.chat.chat_view import ChatView
from vllmchat.ui.chat.conversation_list import ConversationList
from vllmchat.ui.offload.memory_panel import MemoryPanel
from vllmchat.ui.offload.offload_panel import OffloadPanel
from vllmchat.ui.window.bridge.engine_bridge import EngineBridge
from vllmchat.ui.window.loads.load_view import LoadView
from vllmchat.ui.window.readouts.memory_readout import MemoryReadout
from vllmchat.ui.window.readouts.status_line import StatusLine

Ended = Callable[[DoneEvent | ErrorEvent], None]


class TurnView:
    """Given the bridge, the conversations (to read), the chat's widgets, the panels a
    turn's figures go to, the load view (is a model loaded), the status bar, what to do
    once a reply is complete (``after_reply``: its title, the next summary), and whom to
    tell once a turn's end is shown (``ended``: the window's ``turn_ended`` signal)."""

    def __init__(
        self,
        bridge: EngineBridge,
        conversations: Conversations,
        parent: QWidget,
        chat: tuple[ChatView, ChatInput, ConversationList],
        panels: tuple[MemoryReadout, StatusLine, OffloadPanel, MemoryPanel],
        loads: LoadView,
        status_bar: QStatusBar,
        after_reply: Callable[[], None],
        ended: Ended = lambda _event: None,
    ) -> None:
        self.bridge, self.stored, self.parent = bridge, conversations, parent
        self.chat, self.input, self.conversations = chat
        self.readout, self.status_line, self.offload, self.memory = panels
        self.loads, self.status_bar, self.after_reply = loads, status_bar, after_reply
        self.ended = ended
        self.unsent: str | None = None  # the message sent last, until the store has it
        self.last: DoneEvent | ErrorEvent | None = None  # the outcome of the last turn

    def wire(self) -> None:
        """Bound methods only: a lambda connected to the engine thread's signals would
        run on that thread."""
        e = self.bridge.events
        e.turn_started.connect(self._on_turn_started)
        e.token_received.connect(self.chat.append_token)
        e.token_received.connect(self.readout.count_token)
        e.thinking_received.connect(self.chat.append_thinking)
        e.thought_for.connect(self.chat.thought_for)
        e.prefill_progress.connect(self._on_prefill)
        e.prompt_planned.connect(self._on_plan)
        e.summary_changed.connect(self._on_summary)
        e.stats_ready.connect(self._on_stats)
        e.turn_finished.connect(self._on_done)
        e.turn_failed.connect(self._on_failed)
        e.message_stored.connect(self._on_message_stored)
        self.input.send_requested.connect(self.send)
        self.input.stop_requested.connect(self.bridge.stop)
        self.chat.regenerate_requested.connect(self.regenerate)
        self.chat.edit_requested.connect(self.edit_message)

    # -- what the user asks -----------------------------------------------------------
    def send(self, text: str) -> None:
        if self.loads.info is None:
            self.status_bar.showMessage("Load a model first (Model → Choose model…).")
            return
        self.chat.add_message("user", text)
        self.chat.start_reply()
        self.unsent = text  # until the store has it
        self.bridge.send(text)

    def regenerate(self) -> None:
        self.chat.remove_last_reply()
        self.chat.start_reply()
        self.bridge.regenerate()

    def edit_message(self, message_id: int) -> None:
        original = self.stored.message(message_id)
        if original is None:
            return  # deleted meanwhile
        text, ok = QInputDialog.getMultiLineText(
            self.parent, "Edit message", "Message:", original.content
        )
        if not ok or not text.strip():
            return
        self.chat.remove_from(message_id)
        self.chat.add_message("user", text)
        self.chat.start_reply()
        self.bridge.edit(message_id, text)

    # -- what the application layer announces -----------------------------------------
    def _on_turn_started(self, _event: TurnStarted) -> None:
        self.input.set_generating(True)

    def _on_message_stored(self, event: MessageStored) -> None:
        self.chat.set_message_id(event.message_id, event.role)
        if event.role == "user":
            self.unsent = None

    def _on_prefill(self, done: int, total: int) -> None:
        self.status_bar.showMessage(f"Reading prompt {done}/{total}…")

    def _on_plan(self, plan: PromptPlanEvent) -> None:
        self.readout.turn_planned(plan.prompt_tokens, plan.n_ctx)
        summary = self.stored.summary(plan.summary_id) if plan.summary_id else None
        self.status_line.set_plan(
            plan.prompt_tokens,
            plan.n_ctx,
            summary.tokens if summary else 0,
            plan.pinned_tokens,
            plan.document_tokens,
            plan.tool_tokens,
        )
        if plan.dropped_messages:
            self.status_bar.showMessage(
                f"The {plan.dropped_messages} oldest messages are left out of this turn.", 8000
            )

    def _on_summary(self, event: SummaryEvent) -> None:
        self.status_bar.showMessage(event.message, 8000)
        summary = self.stored.summary(event.summary_id) if event.summary_id is not None else None
        if event.status == "done" and summary is not None:
            self.chat.insert_summary(event.text, summary.id, summary.last_message_id)

    def _on_stats(self, stats: TurnStats) -> None:
        self.readout.turn_measured(stats)
        self.status_line.set_stats(stats)

    def _on_done(self, event: DoneEvent) -> None:
        self.last = event
        self.chat.finish_reply(event.text, partial=event.stop_reason == "stopped")
        self.input.set_generating(False)
        self.status_bar.clearMessage()
        self.conversations.refresh()
        self.readout.update()
        info = self.loads.info
        if info is not None:
            self.offload.show_measured(info.buffers_mib, event.stats.decode_tok_s)
        self.after_reply()
        self.ended(event)

    def _on_failed(self, event: ErrorEvent) -> None:
        self.last = event
        self.input.set_generating(False)
        if event.partial_text:
            self.chat.finish_reply(event.partial_text, partial=True)
        else:
            self.chat.discard_reply()
        if self.loads.loading:
            self.loads.set_loading(False)
        self.restore_unsent()
        if event.kind != ErrorKind.ENGINE_DIED:  # else the banner comes with EngineDied
            self.memory.show_error(event.kind.value, event.message)
            self.status_bar.showMessage(f"{event.message} {event.fix}".strip(), 15000)
        self.ended(event)

    def restore_unsent(self) -> None:
        """A message the store never took goes back into the input box: nothing typed
        is lost, and sending again works once the cause is gone."""
        text, self.unsent = self.unsent, None
        if text is None:
            return
        self.chat.remove_unsaved_message()
        if not self.input.edit.toPlainText().strip():
            self.input.edit.setPlainText(text)
