"""Speaking on a thread of its own: text in as it streams, audio out, paced.

``SpeakerSlot`` keeps the loaded voice (loaded once; again only when another is picked)
and lets one synthesis run at a time. A ``SpeakSession`` speaks one reply: any thread
feeds it the reply's text (``feed``, then ``finish``), its thread cuts the text into
sentences and synthesises them, and ``events`` hands out the audio as it is made; ``stop``
ends it at once, and the synthesis within a clause.

Speaking must not slow the chat it speaks. The first clause is made at once (the first
audio comes fast); the thread then lowers its own OS priority, and every later clause
waits until the audio already made runs less than ``STREAMING_AHEAD_S`` ahead of the
clock while the reply streams (``AHEAD_S`` once it is complete): most
of the synthesis happens while the listener hears the earlier sentences, not while the
reply's tokens are decoded. Where the decode takes every core, it lends one to each
clause between two tokens and decodes on the others meanwhile (``SpeakerSlot.cores``),
which costs it less than a core taken from its threads; elsewhere the voice runs on one
thread beside it, at the lower priority.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

from vllmchat.core.app.voice.events import SpeakEvent, SpeakFailed, SpeakingEnded, SpokenPiece
from vllmchat.core.voice.models import PiperVoice
from vllmchat.core.voice.speaker import Speaker, Speech
from vllmchat.core.voice.speech_text import SpeechSplitter

# The voice is fifteen times faster than speech on one core: the core the decode lends
# (``core_turns``) where llama.cpp takes every core, a core to spare elsewhere.
SPEAK_THREADS = 1
AHEAD_S = 1.5  # later clauses wait until the audio made is less than this ahead
# ... and this much while the reply is still streaming: the engine is decoding, and each
# clause made then takes its time from it (on the core the decode lends, a clause is
# made in about a fifteenth of its length).
STREAMING_AHEAD_S = 0.5
NICER_BY = 10  # how much lower the session's thread runs after its first clause


class SpeakerSlot:
    """The voice in use, loaded once and kept; one synthesis at a time. Each clause is
    made within ``cores()``: a core lent by a decode that takes them all."""

    def __init__(
        self,
        *,
        threads: int = SPEAK_THREADS,
        cores: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self._threads = threads
        self.cores = cores
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
        quick_start: bool = False,
        pace: Callable[[], None] | None = None,
    ) -> None:
        with self._lock:
            speaker = self._loaded(voice)
            speaker.speak(
                sentence,
                speed=speed,
                stop=stop,
                on_clause=on_clause,
                quick_start=quick_start,
                pace=pace,
                cores=self.cores,
            )

    def _loaded(self, voice: PiperVoice) -> Speaker:
        if self._speaker is None or self._voice != voice:
            self._speaker = None
            self._speaker = Speaker(voice, threads=self._threads)
            self._voice = voice
        return self._speaker

    def close(self) -> None:
        with self._lock:
            self._speaker = None


class SpeakSession:
    """One reply's speech, made on its own thread; its events end with one
    ``SpeakingEnded`` (after a ``SpeakFailed`` when the voice failed)."""

    def __init__(
        self,
        slot: SpeakerSlot,
        voice: Callable[[], PiperVoice],
        speed: float,
        *,
        paced: bool = True,
        on_end: Callable[[SpeakSession], None] | None = None,
    ) -> None:
        self._slot, self._voice, self._speed, self._paced = slot, voice, speed, paced
        self._on_end = on_end
        self._splitter = SpeechSplitter()
        self._lock = threading.Lock()  # the splitter, fed from any thread
        self._finished = False
        self._texts: queue.Queue[str | None] = queue.Queue()
        self._out: queue.Queue[SpeakEvent] = queue.Queue()
        self._stop = threading.Event()
        self._end: SpeakingEnded | None = None  # taken from the queue, kept for the last
        self.ended = False  # SpeakingEnded was handed out
        self._first_at: float | None = None  # when the first audio was made
        self._made_s = 0.0  # audio made so far
        self._thread = threading.Thread(target=self._run, name="vllmchat-speaking", daemon=True)
        self._thread.start()

    # -- from any thread -------------------------------------------------------------------
    def feed(self, text: str) -> None:
        """More of the reply (a streamed piece of text); each sentence it completes is
        spoken in turn."""
        with self._lock:
            if self._finished or self._stop.is_set():
                return
            for sentence in self._splitter.feed(text):
                self._texts.put(sentence)

    def finish(self) -> None:
        """The reply is complete: its last sentence is spoken, then the session ends."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            for sentence in self._splitter.finish():
                self._texts.put(sentence)
            self._texts.put(None)

    def stop(self) -> None:
        """End now (barge-in): ``SpeakingEnded(stopped=True)`` is due at once; the clause
        being made is the last (its audio is dropped), then the thread ends."""
        if not self._stop.is_set():
            self._stop.set()
            self._out.put(SpeakingEnded(stopped=True))
            self._texts.put(None)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- the reader ------------------------------------------------------------------------
    def events(self) -> Iterator[SpeakEvent]:
        """Everything still to come, as it is made, then ``SpeakingEnded`` (blocks: run
        it on a worker)."""
        while self._end is None:
            event = self._out.get()
            if isinstance(event, SpeakingEnded):
                self._end = event
            else:
                yield event
        if not self.ended:
            self.ended = True
            yield self._end

    def ready(self) -> Iterator[SpeakEvent]:
        """What is ready now, without waiting (``SpeakingEnded`` is kept for ``events``)."""
        while self._end is None:
            try:
                event = self._out.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, SpeakingEnded):
                self._end = event
            else:
                yield event

    @property
    def ahead_s(self) -> float:
        """How far the audio made runs ahead of the clock since the first piece."""
        if self._first_at is None:
            return 0.0
        return self._made_s - (time.perf_counter() - self._first_at)

    # -- the session's thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            voice = self._voice()
            self._slot.load(voice)
            while (sentence := self._texts.get()) is not None and not self._stop.is_set():
                self._wait_for_the_listener()
                if self._stop.is_set():
                    break
                self._slot.speak(
                    voice,
                    sentence,
                    speed=self._speed,
                    stop=self._stop.is_set,
                    on_clause=self._made,
                    quick_start=self._first_at is None,  # its first words, cut short
                    pace=self._next_clause,
                )
                if self._paced and self._first_at is not None:
                    lower_thread_priority()
        except Exception as exc:  # the voice failed: said once, the turn goes on
            self._out.put(SpeakFailed(one_line(exc)))
        finally:
            self._out.put(SpeakingEnded(stopped=self._stop.is_set()))
            if self._on_end is not None:
                self._on_end(self)

    def _next_clause(self) -> None:
        """Between clauses: once audio was made, lower the priority and let the listener
        catch up before the next one."""
        if self._paced and self._first_at is not None:
            lower_thread_priority()
            self._wait_for_the_listener()

    def _wait_for_the_listener(self) -> None:
        """Paced: hold the next clause while the audio made runs ``AHEAD_S`` ahead
        (``STREAMING_AHEAD_S`` until the reply is complete)."""
        while self._paced and not self._stop.is_set():
            ahead = self.ahead_s
            lead = AHEAD_S if self._finished else STREAMING_AHEAD_S
            if ahead < lead:
                return
            self._stop.wait(min(ahead - lead + 0.01, 0.1))  # the reply may end meanwhile

    def _made(self, speech: Speech) -> None:
        if speech.pcm and not self._stop.is_set():
            if self._first_at is None:
                self._first_at = time.perf_counter()
            self._made_s += speech.duration_s
            self._out.put(SpokenPiece(speech.text, speech.pcm, speech.sample_rate))


_lowered = threading.local()


def lower_thread_priority() -> None:
    """This thread (and only it) runs ``NICER_BY`` lower from now on, once (Linux; a
    no-op elsewhere, or where the OS refuses)."""
    if getattr(_lowered, "done", False):
        return
    _lowered.done = True
    if not sys.platform.startswith("linux"):  # elsewhere the priority is the process's
        return
    try:
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + NICER_BY))
    except OSError:
        pass


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
