"""What a voice reads of a reply, sentence by sentence as the reply streams.

A ``SpeechSplitter`` is fed the reply's text as it arrives and hands back each
sentence as soon as it is complete, already made speakable (``speech_words``):
code blocks and tables are announced, not read ("A code block in Python."),
thinking is skipped, headings and list items are sentences of their own, and a
sentence that never ends is cut into pieces of at most ``MAX_PIECE`` characters,
so a 10,000-character reply is spoken in bounded pieces from its start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vllmchat.core.voice.speech_words import speakable

# The longest piece given to the voice at once (a run-on sentence is cut at a comma or space).
MAX_PIECE = 300
# A line's start is read only once this much of it is known (is it a fence, a table?).
_LINE_START = 4

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$")
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)")
_ABBREVIATIONS = {"e.g", "i.e", "mr", "mrs", "ms", "dr", "prof", "vs", "st", "no", "fig", "approx"}
_LANGUAGES = {
    "py": "Python",
    "python": "Python",
    "js": "JavaScript",
    "javascript": "JavaScript",
    "ts": "TypeScript",
    "typescript": "TypeScript",
    "sh": "shell",
    "bash": "shell",
    "shell": "shell",
    "console": "shell",
    "c++": "C plus plus",
    "cpp": "C plus plus",
    "c#": "C sharp",
    "cs": "C sharp",
    "rs": "Rust",
    "go": "Go",
    "sql": "SQL",
    "json": "JSON",
    "yaml": "YAML",
    "yml": "YAML",
    "html": "HTML",
    "css": "CSS",
}


@dataclass(frozen=True)
class _Fence:
    """An open code block: the characters that close it."""

    marks: str


class SpeechSplitter:
    """A reply's text in, speakable sentences out, as soon as each is complete."""

    def __init__(self) -> None:
        self._line = ""  # the current line's text not yet read
        self._mid_line = False  # the current line's start was read as prose
        self._prose = ""  # prose read but not yet spoken
        self._fence: _Fence | None = None
        self._in_table = False
        self._thinking = False

    def feed(self, text: str) -> list[str]:
        """The sentences that ``text`` (the next piece of the reply) completes."""
        out: list[str] = []
        self._line += text
        while "\n" in self._line:
            line, self._line = self._line.split("\n", 1)
            if self._mid_line:
                self._mid_line = False
                self._prose += line + " "
                out += self._sentences(final=False)
            else:
                out += self._read_line(line)
        if self._line and self._line_is_prose():
            self._prose += self._line
            self._line = ""
            self._mid_line = True
            out += self._sentences(final=False)
        return out

    def finish(self) -> list[str]:
        """What is left once the reply has ended."""
        out = self.feed("\n") if self._line else []
        return out + self._sentences(final=True)

    def _line_is_prose(self) -> bool:
        if self._mid_line:
            return True
        if self._fence or self._thinking or self._in_table:
            return False
        start = self._line.lstrip()
        return not (len(start) < _LINE_START or start[0] in "`~|<#>-*+_=" or start[0].isdigit())

    def _read_line(self, line: str) -> list[str]:
        stripped = line.strip()
        if self._thinking:
            if "</think>" not in line:
                return []
            self._thinking = False
            return self._read_line(line.split("</think>", 1)[1])
        if self._fence is not None:
            if stripped.startswith(self._fence.marks) and not stripped.strip(self._fence.marks[0]):
                self._fence = None
            return []
        if self._in_table:
            if stripped.startswith("|") or _TABLE_RULE.match(line):
                return []
            self._in_table = False
        return self._read_prose_line(line, stripped)

    def _read_prose_line(self, line: str, stripped: str) -> list[str]:
        fence = _FENCE.match(line)
        if fence:
            self._fence = _Fence(fence.group(1))
            return [*self._sentences(final=True), _code_block(fence.group(2))]
        if stripped.startswith("<think>"):
            self._thinking = True
            return self._sentences(final=True) + self._read_line(stripped[len("<think>") :])
        if stripped.startswith("|") and stripped.count("|") >= 2:
            self._in_table = True
            return [*self._sentences(final=True), "A table."]
        if not stripped or _RULE.match(line):
            return self._sentences(final=True)
        heading = _HEADING.match(line)
        if heading:
            return self._sentences(final=True) + _whole(heading.group(1))
        item = _ITEM.match(line)
        if item:
            out = self._sentences(final=True)
            self._prose = line[item.end() :] + " "
            return out + self._sentences(final=False)
        self._prose += _QUOTE.sub("", line) + " "
        return self._sentences(final=False)

    def _sentences(self, *, final: bool) -> list[str]:
        """The complete sentences in the prose read so far (all of it when ``final``)."""
        out: list[str] = []
        start = 0
        for match in _SENTENCE_END.finditer(self._prose):
            if _abbreviation(self._prose[start : match.start()]):
                continue
            out += _pieces(self._prose[start : match.end()])
            start = match.end()
        rest = self._prose[start:]
        if final:
            out += _pieces(rest)
            rest = ""
        elif len(rest) > MAX_PIECE:
            cut = _cut_at(rest)
            out += _pieces(rest[:cut])
            rest = rest[cut:]
        self._prose = rest
        return out


def speakable_sentences(reply: str) -> list[str]:
    """A whole reply's sentences as a voice reads them."""
    splitter = SpeechSplitter()
    return splitter.feed(reply) + splitter.finish()


def _code_block(language: str) -> str:
    name = _LANGUAGES.get(language.lower(), language.capitalize() if language.isalpha() else "")
    return f"A code block in {name}." if name else "A code block."


def _whole(text: str) -> list[str]:
    """A heading: one sentence of its own, ended with a full stop if it has no end."""
    text = text.strip()
    if text and text[-1] not in ".!?:":
        text += "."
    return _pieces(text)


def _abbreviation(sentence: str) -> bool:
    """Whether the full stop after ``sentence`` ends an abbreviation or an initial."""
    words = sentence.split()
    if not words:
        return False
    last = words[-1].lower().rstrip(".")
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha() and len(words) > 1)


def _cut_at(text: str) -> int:
    """Where to cut a run-on ``text``: after the last comma or space before ``MAX_PIECE``."""
    window = text[:MAX_PIECE]
    for marks in (",;:", " "):
        cut = max(window.rfind(mark) for mark in marks)
        if cut > MAX_PIECE // 3:
            return cut + 1
    return MAX_PIECE


def _pieces(text: str) -> list[str]:
    """``text`` made speakable, in pieces of at most ``MAX_PIECE`` characters."""
    out: list[str] = []
    while len(text) > MAX_PIECE:
        cut = _cut_at(text)
        out += _pieces(text[:cut])
        text = text[cut:]
    spoken = speakable(text)
    while len(spoken) > MAX_PIECE:  # words can grow longer than their digits
        cut = _cut_at(spoken)
        out.append(spoken[:cut].strip())
        spoken = spoken[cut:].strip()
    return [*out, spoken] if spoken else out
