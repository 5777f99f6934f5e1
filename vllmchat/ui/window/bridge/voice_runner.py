"""The voice's work, off the GUI thread: a listening session's events, a sentence
spoken and a turn's reply spoken as it streams, on the window's background pool (the
recogniser and the voice have their own process and thread: nothing here waits on the
engine). A turn runs on the engine's thread as ever; ``spoken`` hands its reply's text,
as each piece is published, to a speaking session whose events are read on the pool, so
the engine is free for the next intent as soon as the turn ends, however long the reply
takes to be said.

Every event is published as its type's signal (``AppEvents``); the worker that runs a
session is handed back too, so that its owner follows that session's events alone.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from vllmchat.core.app.chat_app import ChatApp
from vllmchat.core.app.voice.events import ListenFailed, SpeakFailed, SpeakingEnded
from vllmchat.core.app.voice.listening import ListenSession
from vllmchat.core.app.voice.service import VoiceChoice, VoiceReadiness
from vllmchat.core.app.voice.speaking import SpeakSession
from vllmchat.core.engine.events import TokenEvent
from vllmchat.ui.common.workers import Worker, WorkerGroup
from vllmchat.ui.window.bridge.app_events import AppEvents


class VoiceRunner(QObject):
    """Given the application and its events' signals; ``close`` ends what it runs."""

    closing = Signal()
    """The window is closing: recorders and players let go of their devices."""
    _reply_opened = Signal(object)
    """A turn's speaking session, opened on the engine's thread, to read on the pool."""

    def __init__(self, app: ChatApp, events: AppEvents, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.app, self.events = app, events
        self.jobs = WorkerGroup(self)  # the window's background pool
        self._listening: list[tuple[ListenSession, Worker]] = []
        self._used = False  # the voice was asked for (made): stop it speaking on close
        self._reply: SpeakSession | None = None  # the last turn's reply, until it has ended
        self._reply_lock = threading.Lock()  # its events and its end, published once
        self._reply_opened.connect(self._read_reply)

    def listen(self, *, hands_free: bool) -> tuple[ListenSession, Worker]:
        """A new utterance, its events read on a worker (each published); feed the session
        with the microphone's PCM, ``finish`` or ``cancel`` it."""
        self._used = True
        session = self.app.voice.listen(hands_free=hands_free)
        worker = Worker(session.events, self._listen_failed, name="Listening")
        worker.yielded.connect(self.events.publish, Qt.ConnectionType.DirectConnection)
        self._listening = [(s, w) for s, w in self._listening if w.running]
        self._listening.append((session, worker))
        self.jobs.start(worker)
        return session, worker

    def speak_text(self, text: str, *, voice: str | None, speed: float | None) -> Worker:
        """Speak ``text`` (the voice tried in the settings): its pieces are published."""
        self._used = True
        work = functools.partial(self.app.voice.speak_text, text, voice=voice, speed=speed)
        worker = Worker(work, self._speak_failed, name="Speaking")
        worker.yielded.connect(self.events.publish, Qt.ConnectionType.DirectConnection)
        return self.jobs.start(worker)

    def check(
        self,
        on_result: Callable[[tuple[VoiceReadiness, list[VoiceChoice]]], object],
        on_error: Callable[[Exception], object],
    ) -> Worker:
        """What the voice can do here and the voices installed (the models are put together
        from their packages the first time, which takes a while)."""
        self._used = True
        voice = self.app.voice
        return self.jobs.run(lambda: (voice.available(), voice.voices()), on_result, on_error)

    def spoken(self, intent: Callable[..., Any]) -> Callable[..., Any]:
        """``intent`` (a turn) with its reply spoken as it streams when the settings ask
        for it (read as the turn starts, on the engine's thread). The turn's events pass
        unchanged; the reply still being spoken when the turn ends goes on being spoken
        on the pool. A new turn silences the last one's reply."""

        @functools.wraps(intent)
        def turn(*args: Any, **kwargs: Any) -> Any:
            self._drop_reply()
            events = intent(*args, **kwargs)
            if not self.app.settings.voice_speak_replies or not isinstance(events, Iterator):
                return events
            self._used = True
            return self._feeding(events, self.app.voice.speak_stream())

        return turn

    def _feeding(self, events: Iterator[Any], session: SpeakSession) -> Iterator[Any]:
        """On the engine's thread: the turn's events, its reply's text fed to ``session``."""
        with self._reply_lock:
            self._reply = session
        self._reply_opened.emit(session)
        try:
            for event in events:
                if isinstance(event, TokenEvent):  # the reply, not its thinking
                    session.feed(event.text)
                yield event
        finally:
            session.finish()  # what was said so far is spoken to its end

    def _read_reply(self, session: SpeakSession) -> None:
        """On the GUI thread: the session's events read on the pool, published while it
        is the window's reply (a newer turn's reply drops what an older one still says)."""

        def publish(event: object) -> None:
            with self._reply_lock:
                if self._reply is not session:
                    return
                if isinstance(event, SpeakingEnded):
                    self._reply = None
                self.events.publish(event)

        worker = Worker(session.events, self._speak_failed, name="Speaking")
        worker.yielded.connect(publish, Qt.ConnectionType.DirectConnection)
        self.jobs.start(worker)

    def _drop_reply(self) -> None:
        """The last turn's reply, if still spoken, ends (said as stopped) before the next."""
        with self._reply_lock:
            reply, self._reply = self._reply, None
            if reply is not None:
                reply.stop()
                self.events.publish(SpeakingEnded(stopped=True))

    def stop_speaking(self) -> None:
        """Barge-in: the reply (or sentence) being spoken ends within a clause."""
        if self._used:
            self.app.voice.stop_speaking()

    def _listen_failed(self, exc: Exception) -> None:
        self.events.publish(ListenFailed(f"Listening failed: {exc}"))

    def _speak_failed(self, exc: Exception) -> None:
        self.events.publish(SpeakFailed(f"The voice failed: {exc}"))

    def close(self) -> None:
        """Drop the recordings still listened to and stop speaking; wait for the workers."""
        self.closing.emit()
        for session, _worker in self._listening:
            session.cancel()
        self._listening.clear()
        self.stop_speaking()
        self.jobs.join(10_000)
