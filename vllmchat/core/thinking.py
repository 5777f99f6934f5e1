"""A reasoning model's thinking, told apart from its answer as the reply streams.

Two styles, as the models' chat templates define them:

- ``think``: ``<think>…</think>`` before the answer (Qwen3, QwQ, DeepSeek-R1
  distills). R1's template opens the tag in the prompt itself, so the reply
  starts inside the thinking (``opens``).
- ``harmony``: gpt-oss's channels. The reply is
  ``<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…``;
  ``analysis`` (and ``commentary``) is thinking, ``final`` is the answer.

Thinking is stored apart from the answer, shown folded, and never given to the
next prompt, a summary or a title (the templates drop it from earlier turns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
HARMONY_MARKERS = ("<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>")
_HARMONY_MARK = re.compile(r"<\|(channel|message|start|end|return|constrain|call)\|>")
_HARMONY_HEADER = re.compile(r"<\|channel\|>(\w+)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>")
_TAIL_HOLD = 24  # characters held back while a marker may be arriving in pieces


@dataclass(frozen=True)
class SplitReply:
    """A whole reply, split: what is stored as the message and what apart."""

    answer: str
    thinking: str


def style_of(template: str) -> str:
    """``think``, ``harmony`` or "" from a chat template's source."""
    if "<|channel|>" in template:
        return "harmony"
    if THINK_OPEN in template or THINK_CLOSE in template:
        return "think"
    return ""


@dataclass
class ThinkingSplitter:
    """Feed streamed text; get ``("thinking" | "answer", text)`` pieces back."""

    style: str
    opens: bool = False  # the prompt opened the thinking (no opening tag will come)
    _buffer: str = ""
    _mode: str = field(default="start")
    thinking: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._mode = "thinking" if self.opens else "start"

    def feed(self, text: str) -> list[tuple[str, str]]:
        if not self.style:
            self.answer.append(text)
            return [("answer", text)]
        self._buffer += text
        return self._drain(final=False)

    def finish(self) -> list[tuple[str, str]]:
        """What was held back, at the end of the reply."""
        return self._drain(final=True) if self.style else []

    def split(self) -> SplitReply:
        return SplitReply("".join(self.answer).strip(), "".join(self.thinking).strip())

    def _emit(self, kind: str, text: str, out: list[tuple[str, str]]) -> None:
        if kind == "answer" and not self.answer:
            text = text.lstrip()  # the blank lines after the thinking
        if text:
            (self.thinking if kind == "thinking" else self.answer).append(text)
            out.append((kind, text))

    def _drain(self, *, final: bool) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        step = self._think if self.style == "think" else self._harmony
        while step(out, final):
            pass
        return out

    def _think(self, out: list[tuple[str, str]], final: bool) -> bool:
        b = self._buffer
        if self._mode == "start":
            stripped = b.lstrip()
            if stripped.startswith(THINK_OPEN):
                self._buffer, self._mode = stripped[len(THINK_OPEN) :], "thinking"
                return True
            if not final and THINK_OPEN.startswith(stripped):
                return False  # the tag may still be arriving
            self._mode = "answer"
            return True
        if self._mode == "thinking":
            at = b.find(THINK_CLOSE)
            if at >= 0:
                self._emit("thinking", b[:at], out)
                self._buffer, self._mode = b[at + len(THINK_CLOSE) :].lstrip("\n"), "answer"
                return True
            keep = 0 if final else len(THINK_CLOSE) - 1
            self._emit("thinking", b[: len(b) - keep] if keep else b, out)
            self._buffer = b[len(b) - keep :] if keep else ""
            return False
        self._emit("answer", b, out)
        self._buffer = ""
        return False

    def _harmony(self, out: list[tuple[str, str]], final: bool) -> bool:
        b = self._buffer
        if self._mode.endswith("+role"):  # after <|start|>: the role name is markup
            at = b.find("<|")
            if at < 0 and not final:
                return False
            self._mode, self._buffer = self._mode[: -len("+role")], b[at:] if at >= 0 else ""
            return True
        header = _HARMONY_HEADER.search(b)
        mark = _HARMONY_MARK.search(b)
        if mark is None:
            lt = b.rfind("<")
            hold = len(b) - lt if not final and lt >= 0 and len(b) - lt < _TAIL_HOLD else 0
            self._emit(self._harmony_kind(), b[: len(b) - hold], out)
            self._buffer = b[len(b) - hold :]
            return False
        self._emit(self._harmony_kind(), b[: mark.start()], out)
        if header is not None and header.start() == mark.start():
            channel = header.group(1)
            self._mode = "answer" if channel == "final" else "thinking"
            self._buffer = b[header.end() :]
            return True
        if mark.group(1) in ("channel", "constrain") and not final:
            self._buffer = b[mark.start() :]  # the header is still arriving
            return False
        self._buffer = b[mark.end() :]
        if mark.group(1) == "start":
            self._mode += "+role"
        return True

    def _harmony_kind(self) -> str:
        return "answer" if self._mode in ("answer", "start") else "thinking"


def split_reply(text: str, style: str, *, opens: bool = False) -> SplitReply:
    """A finished reply's answer and thinking."""
    splitter = ThinkingSplitter(style, opens)
    splitter.feed(text)
    splitter.finish()
    return splitter.split()


def answer_of(text: str) -> str:
    """``text`` without any thinking (for titles and summaries, whatever the style)."""
    text = re.sub(r"<think>.*?(</think>|$)", "", text, flags=re.S)
    if THINK_CLOSE in text:
        text = text.split(THINK_CLOSE, 1)[1]
    if "<|channel|>" in text:
        return split_reply(text, "harmony").answer
    return text.strip()
