"""``vllmchat chat --voice``: a turn spoken into the microphone, the reply spoken back.

Each turn records until Enter is pressed or the speaker falls silent; the partial
text is shown on one line as it grows, then the transcript is sent. A line typed
instead is sent as typed (commands too). While the reply is spoken, Enter stops it
(barge-in). The microphone and the speakers are Qt Multimedia's (``vllmchat.audio``);
the recogniser and the voice are the app layer's (``ChatApp.voice``). Without a
microphone the chat goes on typed; a failed recording is kept as a WAV file.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import wave
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.voice.events import (
    Heard,
    ListenFailed,
    PartialTranscript,
    SpeakFailed,
    SpeakingEnded,
    SpokenPiece,
)
from vllmchat.core.engine.events import TokenEvent
from vllmchat.core.paths import data_dir

TICK_S = 0.01


class LineReader:
    """Lines typed, read on a thread so that the Qt loop runs while the user speaks."""

    def __init__(self) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self._kept: list[str] = []
        threading.Thread(target=self._read, name="vllmchat-stdin", daemon=True).start()

    def _read(self) -> None:
        while True:
            line = sys.stdin.readline()
            self._lines.put(line)
            if not line:
                return

    def line(self, timeout: float | None = None) -> str | None:
        """The next line ("" at the end of input), or None when none came in ``timeout``."""
        if self._kept:
            return self._kept.pop()
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def keep(self, line: str) -> None:
        """Hand ``line`` back: the next ``line()`` returns it."""
        self._kept.append(line)


class TerminalVoice:
    """The microphone and the speakers for one terminal chat."""

    def __init__(self, app: ChatApp, out: Any, lines: LineReader) -> None:
        from vllmchat.audio.devices import ensure_application

        ensure_application()
        self.app, self.out, self.lines = app, out, lines
        self._player: Any = None
        self.typed_only = False  # no microphone: the chat goes on typed
        self.speaks = True  # replies are spoken
        self._asking = threading.Event()  # a tool call's question waits for a typed line

    def readline(self) -> str:
        """A line for a question asked during the turn (a tool call's approval)."""
        self._asking.set()
        try:
            return self.lines.line() or ""
        finally:
            self._asking.clear()

    # -- a turn heard -------------------------------------------------------------------------
    def hear(self) -> str | None:
        """What the user said or typed; None at the end of input."""
        from vllmchat.audio.qt_audio import deliver_audio
        from vllmchat.audio.recorder import Recorder

        settings = self.app.settings
        session = self.app.voice.listen(hands_free=True)
        failures: list[str] = []
        recorder = Recorder(
            settings.voice_input_device, on_pcm=session.feed, on_failed=failures.append
        )
        events: queue.Queue[Any] = queue.Queue()
        reader = threading.Thread(target=lambda: _drain(session.events(), events.put), daemon=True)
        reader.start()
        recorder.start()
        self.out.write("you (speak; Enter ends) > ")
        self.out.flush()
        shown = ""
        try:
            while True:
                deliver_audio()
                if failures:
                    session.finish()
                    return self._mic_gone(failures[0], session)
                line = self.lines.line(timeout=TICK_S)
                if line == "":
                    session.cancel()
                    return None
                if line is not None and line.strip():
                    session.cancel()  # typed instead
                    return line.rstrip("\n")
                if line is not None:
                    recorder.stop()
                    session.finish()
                while not events.empty():
                    event = events.get()
                    if isinstance(event, PartialTranscript):
                        shown = _overwrite(self.out, shown, event.text)
                    elif isinstance(event, Heard):
                        recorder.stop()
                        _overwrite(self.out, shown, event.text or "(nothing was heard)")
                        self.out.write("\n")
                        return event.text
                    elif isinstance(event, ListenFailed):
                        recorder.stop()
                        self.out.write(f"\nvoice: {event.message}\n")
                        self._keep(session)
                        return ""
        finally:
            recorder.stop()
            recorder.deleteLater()

    def _mic_gone(self, message: str, session: Any) -> str:
        """The microphone failed: said once; what was recorded is kept; typing goes on."""
        self.out.write(f"\nvoice: {message}\n")
        self._keep(session)
        if not session.audio().pcm:
            self.typed_only = True
            self.out.write("voice: type your messages; replies are still spoken\n")
        return ""

    def _keep(self, session: Any) -> None:
        audio = session.audio()
        if not audio.pcm:
            return
        folder = data_dir() / "recordings"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / time.strftime("recording-%Y%m%d-%H%M%S.wav")
        _write_wav(path, audio.pcm, audio.sample_rate)
        self.out.write(f"voice: the recording is kept in {path} (vllmchat transcribe {path})\n")

    # -- a reply spoken -----------------------------------------------------------------------
    def spoken(self, events: Iterator[Any], show: Callable[[Iterator[Any]], None]) -> None:
        """Show a turn's events while its reply is spoken (its text fed to a speaking
        session as it streams, its audio played as it is made); Enter stops the speech."""
        from vllmchat.audio.qt_audio import deliver_audio

        session = self.app.voice.speak_stream()
        pieces: queue.Queue[Any] = queue.Queue()
        done = threading.Event()

        def shown() -> Iterator[Any]:
            for event in events:
                if isinstance(event, TokenEvent):  # the reply, not its thinking
                    session.feed(event.text)
                yield event

        def run() -> None:
            try:
                show(shown())
            finally:
                session.finish()
                done.set()

        turn = threading.Thread(target=run, name="vllmchat-turn", daemon=True)
        reader = threading.Thread(
            target=lambda: _drain(session.events(), pieces.put), name="vllmchat-voice", daemon=True
        )
        turn.start()
        reader.start()
        player = self._speakers()
        ended = False
        while not (done.is_set() and ended and pieces.empty() and not _playing(player)):
            deliver_audio()
            time.sleep(TICK_S)
            while not pieces.empty():
                event = pieces.get()
                if isinstance(event, SpokenPiece) and player is not None:
                    player.play(event.pcm, event.sample_rate)
                elif isinstance(event, SpeakFailed):
                    sys.stderr.write(f"\nvoice: {event.message}\n")
                ended = ended or isinstance(event, SpeakingEnded | SpeakFailed)
            typed = None if self._asking.is_set() else self.lines.line(timeout=0)
            if typed is not None:
                self.stop(player)  # Enter while speaking: barge-in
                ended = True
                if typed.strip() or not typed:
                    self.lines.keep(typed)  # a message typed over the speech is the next one
        turn.join()

    def stop(self, player: Any) -> None:
        """Barge-in: the speakers fall silent and nothing more is made."""
        self.app.voice.stop_speaking()
        if player is not None:
            player.stop()

    def _speakers(self) -> Any:
        if self._player is None:
            from vllmchat.audio.player import Player

            self._player = Player(self.app.settings.voice_output_device)
            self._player.failed.connect(lambda m: sys.stderr.write(f"\nvoice: {m}\n"))
        return self._player


def _playing(player: Any) -> bool:
    return player is not None and bool(player.playing)


def _drain(events: Iterator[Any], put: Callable[[Any], None]) -> None:
    for event in events:
        put(event)


def _overwrite(out: Any, shown: str, text: str) -> str:
    """The partial transcript written over the last one, on the same line."""
    out.write("\b" * len(shown) + " " * len(shown) + "\b" * len(shown) + text)
    out.flush()
    return text


def _write_wav(path: Path, pcm: bytes, sample_rate: int) -> None:
    with wave.open(str(path), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(sample_rate)
        file.writeframes(pcm)


def open_voice(app: ChatApp, out: Any, state: dict[str, Any]) -> TerminalVoice | None:
    """The terminal's voice, or None (said why) where neither hearing nor speaking can run."""
    readiness = app.voice.available()
    for line in readiness.missing:
        out.write(f"voice: {line}\n")
    if not (readiness.can_listen or readiness.can_speak):
        out.write("voice: off; the chat goes on typed\n")
        return None
    try:
        voice = TerminalVoice(app, out, LineReader())
    except (ImportError, RuntimeError) as exc:  # Qt Multimedia missing
        out.write(f"voice: no microphone or speakers here ({exc}); the chat goes on typed\n")
        return None
    voice.typed_only = not readiness.can_listen
    voice.speaks = readiness.can_speak
    state["readline"] = voice.readline
    return voice


def next_line(voice: TerminalVoice | None, out: Any) -> str | None:
    """The next message, spoken or typed; None at the end of input."""
    if voice is not None and not voice.typed_only:
        return voice.hear()
    out.write("you> ")
    out.flush()
    line = voice.lines.line() if voice is not None else sys.stdin.readline()
    return line or None
