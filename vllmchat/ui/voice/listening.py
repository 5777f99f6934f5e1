"""Listening, as the window does it: the microphone recorded into a ``ListenSession``
whose events a worker reads, until the speech ends (silence, the key released, the
second click), then what was heard, or why nothing was.

Nothing recorded is lost: a recording the recogniser could not write down is kept as a
WAV file (the failure's message says where), and a microphone that fails mid-recording
hands over what it had, which is transcribed as usual.
"""

from __future__ import annotations

import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal

from vllmchat.core.app.voice.events import Heard, ListenFailed, PartialTranscript, SpeechEnded
from vllmchat.core.app.voice.listening import ListenSession
from vllmchat.core.paths import data_dir
from vllmchat.ui.common.workers import Worker
from vllmchat.ui.voice.controls import MicState


class Recording(Protocol):
    """What records the microphone (``vllmchat.audio.recorder.Recorder``, or a stand-in)."""

    @property
    def level(self) -> float: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Listener(Protocol):
    """Starts a session and the worker that reads its events (the bridge's ``voice``)."""

    def listen(self, *, hands_free: bool) -> tuple[ListenSession, Worker]: ...


RecorderFactory = Callable[[str, Callable[[bytes], None], Callable[[str], None]], Recording]
"""(device id, on_pcm, on_failed) -> a recorder, not yet started."""


def qt_recorder(
    device_id: str, on_pcm: Callable[[bytes], None], on_failed: Callable[[str], None]
) -> Recording:
    """The microphone through Qt Multimedia (``AudioUnavailable`` where it is missing)."""
    from vllmchat.audio.errors import AudioUnavailable

    try:
        from vllmchat.audio.recorder import Recorder
    except ImportError as exc:
        raise AudioUnavailable.from_import_error(exc) from exc
    return Recorder(device_id, on_pcm=on_pcm, on_failed=on_failed)


def recordings_dir() -> Path:
    path = data_dir() / "recordings"
    path.mkdir(parents=True, exist_ok=True)
    return path


class ListenFlow(QObject):
    """One utterance at a time: ``start``, then ``finish`` or ``cancel``; it tells what it
    is doing (``state_changed``), the level, the words so far, and the end."""

    state_changed = Signal(object)
    """``MicState``: listening, writing down, idle."""
    level = Signal(float)
    """The microphone's level (0..1), about every 30 ms while it records."""
    partial = Signal(str)
    """The words heard so far (each replaces the last)."""
    heard = Signal(object)
    """``Heard``: the transcript (its text "" when nothing was heard)."""
    failed = Signal(str)
    """Why listening failed, in words for the user (a kept recording's place among them)."""
    warned = Signal(str)
    """Something went wrong but what was recorded is written down all the same."""

    def __init__(
        self,
        listener: Listener,
        settings: Callable[[], Any],
        *,
        make_recorder: RecorderFactory = qt_recorder,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.listener, self.settings, self.make_recorder = listener, settings, make_recorder
        self.state = MicState.IDLE
        self.session: ListenSession | None = None
        self.worker: Worker | None = None
        self.recorder: Recording | None = None
        self.hands_free = False
        self._recorded = 0  # bytes fed to the session
        self._mic_problem = ""  # the microphone's failure, said with the outcome

    def start(self, *, hands_free: bool) -> bool:
        """Start recording an utterance (False if one is under way or the microphone
        cannot be had: ``failed`` says why)."""
        if self.state is not MicState.IDLE:
            return False
        self._recorded, self._mic_problem = 0, ""
        self.hands_free = hands_free
        try:
            recorder = self.make_recorder(
                self.settings().voice_input_device, self._on_pcm, self._on_mic_failed
            )
        except Exception as exc:  # Qt Multimedia missing, or its device list failed
            self.failed.emit(f"The microphone cannot be used: {exc}")
            return False
        session, worker = self.listener.listen(hands_free=hands_free)
        self.session, self.worker, self.recorder = session, worker, recorder
        worker.yielded.connect(self._on_event)
        worker.finished.connect(self._on_finished)
        self._set_state(MicState.LISTENING)
        recorder.start()  # a device that will not open says so at once (_on_mic_failed)
        return self._in(MicState.LISTENING)

    def _in(self, state: MicState) -> bool:
        """Whether the mic is in ``state`` now (a callback may have changed it)."""
        return self.state is state

    def finish(self) -> None:
        """The user is done speaking: what was recorded is written down."""
        if self.state is not MicState.LISTENING or self.session is None:
            return
        self._stop_recorder()
        self.session.finish()
        self._set_state(MicState.HEARING)

    def cancel(self) -> None:
        """Drop the utterance: nothing is written down or sent."""
        if self.session is None:
            return
        self._stop_recorder()
        self.session.cancel()
        self.session = None
        self._set_state(MicState.IDLE)

    @property
    def active(self) -> bool:
        return self.state is not MicState.IDLE

    # -- the recorder (GUI thread) ------------------------------------------------------
    def _on_pcm(self, chunk: bytes) -> None:
        if self.session is not None:
            self.session.feed(chunk)
            self._recorded += len(chunk)
        if self.recorder is not None:
            self.level.emit(self.recorder.level)

    def _on_mic_failed(self, message: str) -> None:
        """The microphone would not open or stopped: what it recorded is written down."""
        self.recorder = None
        if self.session is None:
            return
        if self._recorded == 0:  # nothing to keep
            self.cancel()
            self.failed.emit(message)
            return
        self._mic_problem = message
        self.session.finish()
        self._set_state(MicState.HEARING)

    def _stop_recorder(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder.stop()  # hands over its last chunk

    # -- the session's events (GUI thread) ------------------------------------------------
    def _on_event(self, event: object) -> None:
        if self.sender() is not self.worker:
            return  # an earlier session's
        if isinstance(event, PartialTranscript):
            self.partial.emit(event.text)
        elif isinstance(event, SpeechEnded):
            self._stop_recorder()
            self._set_state(MicState.HEARING)
        elif isinstance(event, Heard):
            if self._mic_problem:
                self.warned.emit(f"{self._mic_problem}.")
            self.heard.emit(event)
        elif isinstance(event, ListenFailed):
            self.failed.emit(self._kept(event.message))

    def _kept(self, message: str) -> str:
        """The failure's message, and where the recording is kept (if there is one)."""
        session = self.session
        audio = session.audio() if session is not None else None
        if audio is None or not audio.pcm:
            return f"Nothing was written down: {message}"
        path = recordings_dir() / time.strftime("recording-%Y%m%d-%H%M%S.wav")
        try:
            with wave.open(str(path), "wb") as out:
                out.setnchannels(audio.channels)
                out.setsampwidth(2)
                out.setframerate(audio.sample_rate)
                out.writeframes(audio.pcm)
        except OSError as exc:
            return f"Nothing was written down: {message} (the recording could not be kept: {exc})"
        return f"Nothing was written down: {message}. The recording is kept in {path}"

    def _on_finished(self) -> None:
        if self.sender() is not self.worker:
            return  # an earlier session's worker
        self._stop_recorder()
        self.session, self.worker = None, None
        self._set_state(MicState.IDLE)

    def _set_state(self, state: MicState) -> None:
        if state is not self.state:
            self.state = state
            self.state_changed.emit(state)

    def close(self) -> None:
        self.cancel()
