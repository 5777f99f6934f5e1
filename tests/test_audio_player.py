"""The player's queue, idle and barge-in, and the messages for no device (no sound server).

CI has no sound server, so no ``QAudioSink`` can play there: these tests give the
player a sink that writes into a ``QBuffer`` and plays on a fake clock the test moves
on. ``test_audio_pulse.py`` plays to a real (null) output where PulseAudio exists.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtCore import QBuffer, QIODevice, QObject, Signal

from tests.audio_or_skip import require_qt_audio

require_qt_audio()

from vllmchat.audio.devices import NO_INPUT, NO_OUTPUT, AudioDeviceInfo, pick  # noqa: E402
from vllmchat.audio.errors import NoAudioDevice  # noqa: E402
from vllmchat.audio.pcm import PcmFormat  # noqa: E402
from vllmchat.audio.player import Player  # noqa: E402
from vllmchat.audio.qt_audio import QtAudio  # noqa: E402

SINK_FORMAT = PcmFormat(48000, 2, "<i2")
BUFFER_BYTES = 9600  # 50 ms at 48 kHz stereo


class ClockedSink(QObject):
    """A sink with ``QAudioSink``'s push-mode surface that plays only when told to."""

    stateChanged = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.played = bytearray()  # what reached the ears, over every start
        self._buffer: QBuffer | None = None
        self._at = 0  # how far into the current buffer it has played
        self._state = QtAudio.State.StoppedState
        self.stops = self.resets = 0

    def start(self) -> QIODevice:
        self._buffer = QBuffer(self)
        self._buffer.open(QIODevice.OpenModeFlag.ReadWrite)
        self._at = 0
        self._set(QtAudio.State.ActiveState)
        return self._buffer

    def held(self) -> int:
        return 0 if self._buffer is None else len(self._buffer.data()) - self._at

    def bytesFree(self) -> int:
        return BUFFER_BYTES - self.held()

    def bufferSize(self) -> int:
        return BUFFER_BYTES

    def state(self) -> QtAudio.State:
        return self._state

    def error(self) -> QtAudio.Error:
        return QtAudio.Error.NoError

    def reset(self) -> None:
        self.resets += 1
        if self._buffer is not None:
            self._at = len(self._buffer.data())  # what it held is dropped, never played

    def stop(self) -> None:
        self.stops += 1
        self._buffer = None
        self._set(QtAudio.State.StoppedState)

    def advance(self, seconds: float) -> None:
        """Play ``seconds`` of what the sink holds; idle when it runs dry."""
        if self._buffer is None:
            return
        size = int(seconds * SINK_FORMAT.sample_rate) * SINK_FORMAT.bytes_per_frame
        data = self._buffer.data().data()
        self.played += data[self._at : self._at + size]
        self._at = min(len(data), self._at + size)
        if self.held() == 0:
            self._set(QtAudio.State.IdleState)
        elif self._state != QtAudio.State.ActiveState:
            self._set(QtAudio.State.ActiveState)

    def _set(self, state: QtAudio.State) -> None:
        self._state = state
        self.stateChanged.emit(state)


def _speech(seconds: float, rate: int = 22050) -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    return (np.sin(2 * np.pi * 220 * t) * 10000).astype("<i2").tobytes()


@pytest.fixture
def sink(qapp) -> ClockedSink:
    return ClockedSink()


@pytest.fixture
def player(sink: ClockedSink) -> Player:
    return Player(sink_factory=lambda wanted: (sink, SINK_FORMAT))


def _play_out(qtbot, sink: ClockedSink, player: Player, seconds: float) -> None:
    for _ in range(int(seconds / 0.02)):
        qtbot.wait(12)  # the player's timer tops the sink up
        sink.advance(0.02)


def test_pieces_are_queued_resampled_played_in_order_then_idle(qtbot, sink, player) -> None:
    first, second = _speech(0.3), _speech(0.2, rate=16000)
    player.play(first, 22050)
    player.play(second, 16000)
    assert player.output_format == SINK_FORMAT
    assert player.seconds_queued == pytest.approx(0.5, abs=0.002)
    assert sink.bytesFree() == 0  # topped up at once
    with qtbot.waitSignal(player.idle, timeout=5000):
        _play_out(qtbot, sink, player, 0.7)
    expected = 0.5 * SINK_FORMAT.sample_rate * SINK_FORMAT.bytes_per_frame
    assert len(sink.played) == pytest.approx(expected, abs=64)
    assert player.bytes_written == len(sink.played)
    assert not player.playing and player.seconds_queued == 0.0


def test_stop_is_silent_at_once_and_play_starts_again(qtbot, sink, player) -> None:
    player.play(_speech(2.0), 22050)
    _play_out(qtbot, sink, player, 0.2)
    assert player.seconds_queued == pytest.approx(1.8, abs=0.05)
    idles: list[bool] = []
    player.idle.connect(lambda: idles.append(True))
    player.stop()
    assert sink.state() == QtAudio.State.StoppedState and sink.resets == 1
    written, played = player.bytes_written, len(sink.played)
    assert 0 < written - played <= BUFFER_BYTES  # what the sink held was dropped, not played
    _play_out(qtbot, sink, player, 0.2)
    assert player.bytes_written == written and len(sink.played) == played
    assert player.seconds_queued == 0.0 and not player.playing and not idles
    with qtbot.waitSignal(player.idle, timeout=5000):
        player.play(_speech(0.1), 22050)
        _play_out(qtbot, sink, player, 0.3)
    assert player.bytes_written > written


def test_no_output_device_is_said_once_and_nothing_plays(qtbot) -> None:
    def no_device(wanted: PcmFormat) -> tuple[object, PcmFormat]:
        raise NoAudioDevice(NO_OUTPUT)

    player = Player(sink_factory=no_device)
    with qtbot.waitSignal(player.failed) as failed:
        player.play(_speech(0.1), 22050)
    assert failed.args == [NO_OUTPUT]
    assert not player.playing and player.seconds_queued == 0.0


def test_devices_are_picked_by_id_or_the_default_and_none_is_said_plainly() -> None:
    usb = AudioDeviceInfo("alsa_input.usb", "USB headset", False)
    builtin = AudioDeviceInfo("alsa_input.pci", "Built-in microphone", True)
    assert pick([usb, builtin], "", kind="microphone") == builtin
    assert pick([usb], "", kind="microphone") == usb  # no default named: the first
    assert pick([usb, builtin], "alsa_input.usb", kind="microphone") == usb
    with pytest.raises(NoAudioDevice) as none:
        pick([], "", kind="microphone")
    assert str(none.value) == NO_INPUT
    assert "No microphone found" in NO_INPUT and "PulseAudio or PipeWire" in NO_INPUT
    with pytest.raises(NoAudioDevice) as gone:
        pick([builtin], "alsa_input.usb", kind="microphone")
    assert str(gone.value) == (
        "The microphone chosen in the settings (alsa_input.usb) is not connected: choose "
        "another, or the system default (connected: Built-in microphone (alsa_input.pci))"
    )
    with pytest.raises(NoAudioDevice, match="No speakers or headphones found"):
        pick([], "", kind="output")


def test_without_qt_multimedia_audio_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['PySide6.QtMultimedia'] = None\n"
        "from vllmchat.audio.errors import AudioUnavailable\n"
        "try:\n"
        "    import vllmchat.audio.recorder\n"
        "except AudioUnavailable as exc:\n"
        "    print(exc)\n"
        "try:\n"
        "    import vllmchat.audio.player\n"
        "except ImportError as exc:\n"  # callers that only know ImportError
        "    print(type(exc).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines() == ["pip install 'vllmchat[voice]'", "AudioUnavailable"]
