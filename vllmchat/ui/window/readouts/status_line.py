"""The status line: model, speed, prefill vs reused tokens, the context bar, and a mark
where greedy replies with speculation can differ from plain decoding."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget

from vllmchat.core.engine.events import TurnStats
from vllmchat.core.engine.exactness import identity_note
from vllmchat.core.engine.info import ModelInfo
from vllmchat.core.settings import SamplingSettings
from vllmchat.ui.common.icons import inline_html


class ContextBar(QWidget):
    """Used / n_ctx, with where the verbatim history (after the summary) begins."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.used = 0
        self.n_ctx = 1
        self.summary_tokens = 0
        self.pinned_tokens = 0
        self.setMinimumSize(180, 14)
        self.setToolTip("Context used")

    def set_usage(
        self, used: int, n_ctx: int, summary_tokens: int = 0, pinned_tokens: int = 0
    ) -> None:
        self.used, self.n_ctx, self.summary_tokens = used, max(1, n_ctx), summary_tokens
        self.pinned_tokens = pinned_tokens
        note = f", summary {summary_tokens} tokens" if summary_tokens else ""
        note += f", pinned messages {pinned_tokens} tokens" if pinned_tokens else ""
        self.setToolTip(f"Context: {used:,} of {n_ctx:,} tokens{note}")
        self.update()

    def paintEvent(self, _event: object) -> None:
        p = QPainter(self)
        r = QRectF(self.rect()).adjusted(0.5, 2.5, -0.5, -2.5)
        p.setPen(QColor("#888"))
        p.setBrush(QColor("#eee"))
        p.drawRoundedRect(r, 3, 3)
        frac = min(1.0, self.used / self.n_ctx)
        fill = QRectF(r.left(), r.top(), r.width() * frac, r.height())
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor("#d9534f") if frac > 0.9 else QColor("#5b9bd5"))
        p.drawRoundedRect(fill, 3, 3)
        if self.summary_tokens:
            x = r.left() + r.width() * min(1.0, self.summary_tokens / self.n_ctx)
            p.setBrush(QColor("#f0ad4e"))
            p.drawRect(QRectF(r.left(), r.top(), x - r.left(), r.height()))
            p.setPen(QColor("#333"))
            p.drawLine(int(x), int(r.top()), int(x), int(r.bottom()))
        if self.pinned_tokens:  # the pinned messages' share, in violet, at the start
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor("#9467bd"))
            width = r.width() * min(1.0, self.pinned_tokens / self.n_ctx)
            p.drawRect(QRectF(r.left(), r.top(), width, r.height()))


class StatusLine(QWidget):
    """Model · quant · tok/s · prefilled/reused · context."""

    def __init__(self, events: Any = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        self.model = QLabel("No model")
        self.speed = QLabel("")
        self.tokens = QLabel("")
        self.context = ContextBar()
        self.context_label = QLabel("")
        self.context_label.setTextFormat(Qt.TextFormat.RichText)  # the shares' icons
        self.identity = QLabel("speculation: greedy replies may differ")  # where it is not exact
        self.identity.setStyleSheet("color: #a60;")
        self.identity.hide()
        self.info: ModelInfo | None = None
        for w in (self.model, self.speed, self.tokens, self.identity):
            layout.addWidget(w)
            layout.addSpacing(12)
        self.message = QLabel("")  # the status bar's passing messages (it has no room of its own)
        self.message.setStyleSheet("color: palette(highlight);")
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.message, 1)
        layout.addStretch()
        layout.addWidget(self.context_label)
        layout.addWidget(self.context)
        if events is not None:
            self.follow(events)

    def show_message(self, text: str) -> None:
        """A passing message (``QStatusBar.messageChanged``), "" when it ends."""
        self.message.setText(text)
        self.message.setToolTip(text)

    def set_model(self, name: str, quant: str, n_ctx: int) -> None:
        self.model.setText(f"<b>{name}</b> · {quant}" if quant else f"<b>{name}</b>")
        self.context.set_usage(0, n_ctx)

    def set_stats(self, stats: TurnStats) -> None:
        speed = f"{stats.decode_tok_s:.1f} tok/s"
        if stats.drafted:
            speed += f" · drafted {stats.drafted}, accepted {stats.accepted}"
        self.speed.setText(speed)
        self.speed.setToolTip(stats.note)
        self.tokens.setText(
            f"prefilled {stats.tokens_prefilled:,} · reused "
            f"{stats.tokens_reused:,} · first token {stats.ttft_s * 1000:.0f} ms"
        )
        used = stats.prompt_tokens + stats.decode_tokens
        self.context.set_usage(
            used, stats.n_ctx, self.context.summary_tokens, self.context.pinned_tokens
        )
        self.context_label.setText(f"{used:,} / {stats.n_ctx:,}{self._documents}")

    _documents = ""  # the documents' share, as the label gives it

    def set_plan(
        self,
        prompt_tokens: int,
        n_ctx: int,
        summary_tokens: int,
        pinned_tokens: int = 0,
        document_tokens: int = 0,
        tool_tokens: int = 0,
    ) -> None:
        """The context bar: pins (whole documents among them) in violet; the label gives
        the documents' share and the offered tool schemas' share."""
        self.context.set_usage(prompt_tokens, n_ctx, summary_tokens, pinned_tokens)
        shares = [("document", document_tokens), ("tool", tool_tokens)]
        self._documents = "".join(
            f" · {inline_html(name)} {tokens:,}" for name, tokens in shares if tokens
        )
        tips = []
        if document_tokens:
            tips.append(f"The documents take {document_tokens:,} tokens of the prompt.")
        if tool_tokens:
            tips.append(f"The offered tools' schemas take {tool_tokens:,} tokens of the prompt.")
        self.context_label.setToolTip("\n".join(tips))
        self.context_label.setText(f"{prompt_tokens:,} / {n_ctx:,}{self._documents}")

    def follow(self, events: Any) -> None:
        """Keep the identity mark current from the engine bridge's events (each load,
        each change of the sampling settings)."""
        events.load_finished.connect(self._on_loaded)
        events.settings_changed.connect(self._on_settings)

    def _on_loaded(self, event: Any) -> None:
        self.info = event.info
        self.show_identity(event.info, event.settings.sampler)

    def _on_settings(self, event: Any) -> None:
        self.show_identity(self.info, event.settings.sampler)

    def show_identity(self, info: ModelInfo | None, sampling: SamplingSettings) -> None:
        """The mark, with the engine's reason as its tooltip, where speculation is on under
        greedy sampling and this build and placement do not keep it token for token."""
        note = ""
        if info is not None:
            note = identity_note(
                info.exact_verify,
                info.exact_verify_reason,
                speculation=sampling.speculation,
                temperature=sampling.temperature,
            )
        self.identity.setToolTip(f"<p>{html.escape(note)}</p>" if note else "")  # wrapped
        self.identity.setAccessibleDescription(note)
        self.identity.setVisible(bool(note))
