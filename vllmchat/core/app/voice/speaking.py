"""Speaking a reply on a thread of its own: sentences in as they complete, audio out.

``SpeakerSlot`` keeps the loaded voice (loaded once; again only when another is picked)
and lets one synthesis run at a time. A ``SpeakingRun`` speaks one reply: the turn's
thread hands it sentences (``say``) and collects what is ready (``ready``, ``rest``)
without waiting; ``stop`` ends it at once, and the synthesis within a clause.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

from vllmchat.core.app.voice.events import SpeakEvent, SpeakFailed, SpeakingEnded, SpokenPiece
from vllmchat.core.voice.models import PiperVoice
from vllmchat.core.voice.speaker import Speaker, Speech


class SpeakerSlot:
    """The voice in use, loaded once and kept; one synthesis at a time."""

    def __init__(self, *, threads: int = 2) -> None:
        self._threads = threads
        self._speaker: Speaker | None = None
        self._voice: PiperVoice | None = None
        self._lock = threading.Lock()

    def load(self, voice: PiperVoice) -> None:
        """Load ``voice`` now (raises when it cannot be loaded)."""
        with self._lock:
            self._loaded(voice)

    def speak(
        self,
        voice: PiperVoice,
        sentence: str,
        *,
        speed: float,
        stop: Callable[[], bool],
        on_clause: Callable[[Speech], None],
    ) -> None:
        with self._lock:
            speaker = self._loaded(voice)
            speaker.speak(sentence, speed=speed, stop=stop, on_clause=on_clause)

    def _loaded(self, voice: PiperVoice) -> Speaker:
        if self._speaker is None or self._voice != voice:
            self._speaker = None
            self._speaker = Speaker(voice, threads=self._threads)
            self._voice = voice
        return self._speaker

    def close(self) -> None:
        with self._lock:
            self._speaker = None


class SpeakingRun:
    """One reply's speech, made on its own thread; ends with one ``SpeakingEnded``."""

    def __init__(self, slot: SpeakerSlot, voice: Callable[[], PiperVoice], speed: float) -> None:
        self._slot = slot
        self._voice = voice
        self._speed = speed
        self._texts: queue.Queue[str | None] = queue.Queue()
        self._out: queue.Queue[SpeakEvent] = queue.Queue()
        self._stop = threading.Event()
        self.ended = False  # SpeakingEnded was handed out
        self._end: SpeakingEnded | None = None
        self._thread = threading.Thread(target=self._run, name="vllmchat-speaking", daemon=True)
        self._thread.start()

    def say(self, sentence: str) -> None:
        self._texts.put(sentence)

    def close(self) -> None:
        """No more sentences: the run ends once those given are spoken."""
        self._texts.put(None)

    def stop(self) -> None:
        """End now: ``SpeakingEnded`` is due at once; the clause being made is the last
        (its audio is dropped), then the thread ends."""
        if not self._stop.is_set():
            self._stop.set()
            self._out.put(SpeakingEnded(stopped=True))
            self._texts.put(None)

    def ready(self) -> Iterator[SpeakEvent]:
        """What is ready now, without waiting (``SpeakingEnded`` is kept for ``rest``)."""
        while self._end is None:
            try:
                event = self._out.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, SpeakingEnded):
                self._end = event
            else:
                yield event

    def rest(self) -> Iterator[SpeakEvent]:
        """Everything still to come, as it is made, then ``SpeakingEnded``."""
        while self._end is None:
            event = self._out.get()
            if isinstance(event, SpeakingEnded):
                self._end = event
            else:
                yield event
        self.ended = True
        yield self._end

    @property
    def done(self) -> bool:
        """Nothing more will be spoken (``SpeakingEnded`` may still be due)."""
        return self._end is not None

    def _run(self) -> None:
        try:
            voice = self._voice()
            self._slot.load(voice)
            while (sentence := self._texts.get()) is not None and not self._stop.is_set():
                self._slot.speak(
                    voice,
                    sentence,
                    speed=self._speed,
                    stop=self._stop.is_set,
                    on_clause=self._made,
                )
        except Exception as exc:  # the voice failed: said once, the turn goes on
            self._out.put(SpeakFailed(one_line(exc)))
        self._out.put(SpeakingEnded(stopped=self._stop.is_set()))

    def _made(self, speech: Speech) -> None:
        if speech.pcm and not self._stop.is_set():
            self._out.put(SpokenPiece(speech.text, speech.pcm, speech.sample_rate))


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
