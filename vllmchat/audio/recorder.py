"""The microphone, recorded as 16 kHz mono 16-bit PCM in chunks of about 30 ms.

``Recorder`` reads a ``QAudioSource`` in pull mode on the thread that made it (which
runs a Qt event loop). Where the device takes 16 kHz mono Int16 the samples arrive as
recorded; otherwise (48 kHz stereo float, say) they are converted. Every chunk goes to
``on_pcm`` as it is complete; ``stop()`` hands over the last, shorter one. A failure
(no such device, the device refusing to open because it is busy or not allowed, the
device unplugged mid-recording) is said once through ``on_failed``; what was recorded
until then has been delivered, so the caller keeps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import (
    QCoreApplication,
    QIODevice,
    QMicrophonePermission,
    QObject,
    QPermission,
    Qt,
    QTimer,
)

from vllmchat.audio.devices import (
    AudioDeviceInfo,
    describe,
    device_format,
    device_id,
    ensure_application,
    find_input,
    qt_format,
)
from vllmchat.audio.errors import NoAudioDevice
from vllmchat.audio.pcm import MIC_FORMAT, PcmConverter, PcmFormat, rms_level
from vllmchat.audio.qt_audio import QAudioSource, QMediaDevices, QtAudio

CHUNK_S = 0.03
CHUNK_BYTES = int(MIC_FORMAT.sample_rate * CHUNK_S) * MIC_FORMAT.bytes_per_frame
PRIVACY_HINT = "allow it in the system's privacy settings (Microphone)"
# A microphone delivers sound (silence too) all the time: nothing for this long means it
# is gone, where the sound server does not say so (PulseAudio through Qt 6.11 does not).
SILENT_DEVICE_S = 2.0


class Recorder(QObject):
    """One recording at a time from one microphone ("" = the system default)."""

    def __init__(
        self,
        device_id: str = "",
        *,
        on_pcm: Callable[[bytes], None],
        on_failed: Callable[[str], None],
        capture_format: PcmFormat | None = None,
        parent: QObject | None = None,
    ) -> None:
        """``capture_format``: what to ask the device for (by default 16 kHz mono Int16
        where it takes it, else its preferred format); the chunks are 16 kHz mono anyway."""
        ensure_application()
        super().__init__(parent)
        self._wanted_id = device_id
        self._on_pcm, self._on_failed = on_pcm, on_failed
        self._capture_format = capture_format
        self._source: QAudioSource | None = None
        self._io: QIODevice | None = None
        self._converter: PcmConverter | None = None
        self._pending = b""
        self._failed = False
        self._level = 0.0
        self._device: AudioDeviceInfo | None = None
        self._watcher = QMediaDevices(self)
        self._watcher.audioInputsChanged.connect(self._check_still_there)
        self._last_sound = 0.0
        self._watchdog = QTimer(self)
        self._watchdog.setInterval(250)
        self._watchdog.timeout.connect(self._check_flowing)

    @property
    def level(self) -> float:
        """The last chunk's loudness (RMS, 0..1), for a meter."""
        return self._level

    @property
    def recording(self) -> bool:
        return self._source is not None

    @property
    def device(self) -> AudioDeviceInfo | None:
        """The microphone being recorded (None before ``start``)."""
        return self._device

    def start(self) -> None:
        """Start recording; a failure to start comes through ``on_failed``."""
        if self._source is not None:
            return
        self._failed = False
        status = _application().checkPermission(QMicrophonePermission())
        if status == Qt.PermissionStatus.Denied:
            self._fail(f"This app may not use the microphone: {PRIVACY_HINT}")
            return
        if status == Qt.PermissionStatus.Undetermined:
            _application().requestPermission(
                QMicrophonePermission(), self, self._permission_answered
            )
            return
        self._open()

    def stop(self) -> None:
        """Stop recording; the last partial chunk goes to ``on_pcm``."""
        if self._source is None:
            return
        self._read()
        self._close()
        self._flush()

    def _permission_answered(self, permission: QPermission) -> None:
        if permission.status() == Qt.PermissionStatus.Granted:
            self._open()
        else:
            self._fail(f"Permission to use the microphone was refused: {PRIVACY_HINT}")

    def _open(self) -> None:
        try:
            device = find_input(self._wanted_id)
        except NoAudioDevice as exc:
            self._fail(str(exc))
            return
        fmt = self._capture_format
        if fmt is None:
            fmt = device_format(device, MIC_FORMAT)
        self._device = describe(device)
        self._converter = PcmConverter(fmt, MIC_FORMAT)
        self._pending = b""
        source = QAudioSource(device, qt_format(fmt), self)
        source.setBufferSize(fmt.bytes_per_frame * fmt.sample_rate * 2)  # 2 s: a busy GUI's stalls
        self._source = source
        source.stateChanged.connect(self._state_changed)
        self._io = source.start()
        self._last_sound = time.monotonic()
        self._watchdog.start()
        if self._io is not None:
            self._io.readyRead.connect(self._read)
        if source.error() != QtAudio.Error.NoError or self._io is None:
            self._fail(self._open_failure())

    def _open_failure(self) -> str:
        name = self._device.description if self._device else "the microphone"
        return (
            f"The microphone “{name}” could not be opened: another program may hold it, "
            f"or this app may not use it ({PRIVACY_HINT})"
        )

    def _read(self) -> None:
        if self._io is None or self._converter is None:
            return
        data = bytes(self._io.readAll().data())
        if not data:
            return
        self._last_sound = time.monotonic()
        self._pending += self._converter.feed(data)
        while len(self._pending) >= CHUNK_BYTES:
            chunk, self._pending = self._pending[:CHUNK_BYTES], self._pending[CHUNK_BYTES:]
            self._deliver(chunk)

    def _deliver(self, chunk: bytes) -> None:
        self._level = rms_level(chunk)
        self._on_pcm(chunk)

    def _flush(self) -> None:
        if self._pending:
            chunk, self._pending = self._pending, b""
            self._deliver(chunk)

    def _state_changed(self) -> None:
        source = self._source
        if source is None or source.state() != QtAudio.State.StoppedState:
            return
        error = source.error()
        if error == QtAudio.Error.OpenError:
            self._fail(self._open_failure())
        elif error != QtAudio.Error.NoError:
            self._fail(self._lost())

    def _check_still_there(self) -> None:
        if self._source is None or self._device is None:
            return
        present = {device_id(d) for d in QMediaDevices.audioInputs()}
        if self._device.id not in present:
            self._fail(self._lost())

    def _check_flowing(self) -> None:
        if self._source is not None and time.monotonic() - self._last_sound > SILENT_DEVICE_S:
            self._read()
            if time.monotonic() - self._last_sound > SILENT_DEVICE_S:
                self._fail(self._lost())

    def _lost(self) -> str:
        name = self._device.description if self._device else "the microphone"
        return f"The microphone “{name}” stopped (unplugged?): what was recorded is kept"

    def _fail(self, message: str) -> None:
        if self._source is not None:
            self._read()
            self._close()
            self._flush()
        if not self._failed:
            self._failed = True
            self._on_failed(message)

    def _close(self) -> None:
        self._watchdog.stop()
        source, self._source = self._source, None
        io, self._io = self._io, None
        if io is not None:
            io.readyRead.disconnect(self._read)
        if source is not None:
            source.stateChanged.disconnect(self._state_changed)
            source.stop()
            source.deleteLater()
        self._level = 0.0


def _application() -> QCoreApplication:
    app = QCoreApplication.instance()
    assert app is not None  # made by ensure_application()
    return app
