"""Speech played through a ``QAudioSink`` in push mode, and stopped at once (barge-in).

``play`` queues a piece; a 10 ms timer writes as much as the sink has room for.
``stop`` drops the queue and the sink's buffer, then stops the sink: nothing more is
written and the output falls silent. ``idle`` is emitted when everything queued has
been played (not after ``stop``). Lives on a thread running a Qt event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QIODevice, QObject, QTimer, Signal

from vllmchat.audio.devices import device_format, ensure_application, find_output, qt_format
from vllmchat.audio.errors import NoAudioDevice
from vllmchat.audio.pcm import PcmFormat
from vllmchat.audio.playback_queue import PlaybackQueue
from vllmchat.audio.qt_audio import QAudioSink, QtAudio

FEED_MS = 10
BUFFER_S = 0.1  # what the sink holds ahead: room for timer jitter, little to drop at stop

# Makes the sink for the speech's format: the sink, and the format it plays.
SinkFactory = Callable[[PcmFormat], tuple[Any, PcmFormat]]


class Player(QObject):
    """One output ("" = the system default); pieces are 16-bit mono PCM at any rate."""

    idle = Signal()
    """Everything queued has been played."""
    failed = Signal(str)
    """The output could not be had (no device, it would not open); the message says why."""

    def __init__(
        self,
        device_id: str = "",
        *,
        sink_factory: SinkFactory | None = None,
        parent: QObject | None = None,
    ) -> None:
        """``sink_factory``: how the sink is made (by default a ``QAudioSink`` on the
        device); tests give a sink with a fake clock where no device can exist."""
        ensure_application()
        super().__init__(parent)
        self._device_id = device_id
        self._make_sink = sink_factory or self._qt_sink
        self._sink: Any = None
        self._io: QIODevice | None = None
        self._queue: PlaybackQueue | None = None
        self._busy = False
        self._written = 0
        self.last_stop_s = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(FEED_MS)
        self._timer.timeout.connect(self._feed)

    def play(self, pcm: bytes, sample_rate: int) -> None:
        """Queue a piece of 16-bit mono PCM (resampled if its rate is not the sink's)."""
        if not pcm:
            return
        if self._sink is None and not self._open(sample_rate):
            return
        assert self._queue is not None
        self._queue.add(pcm, sample_rate)
        self._busy = True
        if self._io is None:
            self._io = self._sink.start()
            if self._io is None or self._sink.error() == QtAudio.Error.OpenError:
                self._io = None
                self._queue.clear()
                self._busy = False
                self.failed.emit("The speakers could not be opened: another program may hold them")
                return
        self._feed()
        self._timer.start()

    def stop(self) -> None:
        """Barge-in: silent at once; the queue and the sink's buffer are dropped."""
        started = time.perf_counter()
        self._timer.stop()
        self._busy = False
        if self._queue is not None:
            self._queue.clear()
        if self._sink is not None and self._io is not None:
            self._io = None
            self._sink.reset()
            self._sink.stop()
        self.last_stop_s = time.perf_counter() - started

    @property
    def playing(self) -> bool:
        return self._busy

    @property
    def seconds_queued(self) -> float:
        """Speech not yet heard: the queue, and what the sink holds."""
        if self._queue is None or not self._busy:
            return 0.0
        held = 0
        if self._io is not None:
            held = max(0, self._sink.bufferSize() - self._sink.bytesFree())
        return self._queue.seconds + self._queue.output.seconds(held)

    @property
    def bytes_written(self) -> int:
        """Bytes handed to the sink since the player was made."""
        return self._written

    @property
    def output_format(self) -> PcmFormat | None:
        return self._queue.output if self._queue else None

    def _open(self, sample_rate: int) -> bool:
        try:
            self._sink, fmt = self._make_sink(PcmFormat(sample_rate, 1, "<i2"))
        except NoAudioDevice as exc:
            self.failed.emit(str(exc))
            return False
        self._queue = PlaybackQueue(fmt)
        self._sink.stateChanged.connect(self._state_changed)
        return True

    def _qt_sink(self, wanted: PcmFormat) -> tuple[QAudioSink, PcmFormat]:
        device = find_output(self._device_id)
        fmt = device_format(device, wanted)
        sink = QAudioSink(device, qt_format(fmt), self)
        sink.setBufferSize(int(fmt.bytes_per_frame * fmt.sample_rate * BUFFER_S))
        return sink, fmt

    def _feed(self) -> None:
        if self._io is None or self._queue is None:
            return
        room = self._sink.bytesFree()
        data = self._queue.take(room) if room > 0 else b""
        if data:
            written = self._io.write(data)
            self._written += max(0, written)
        self._check_idle()

    def _state_changed(self) -> None:
        state = self._sink.state()
        if state == QtAudio.State.IdleState:
            self._check_idle()
        elif state == QtAudio.State.StoppedState and self._io is not None and self._broken():
            self._io = None
            self._timer.stop()
            if self._queue is not None:
                self._queue.clear()
            self._busy = False
            self.failed.emit("The speakers stopped (unplugged?)")

    def _broken(self) -> bool:
        return self._sink.error() not in (QtAudio.Error.NoError, QtAudio.Error.UnderrunError)

    def _check_idle(self) -> None:
        if not self._busy or self._queue is None or self._queue.size:
            return
        if self._sink.state() == QtAudio.State.IdleState:
            self._busy = False
            self._timer.stop()
            self.idle.emit()
