"""The machine's microphones and speakers as Qt Multimedia lists them, as frozen values.

A device is named by its id (a string, what the settings keep; "" is the system
default). Qt Multimedia needs a ``QCoreApplication``: one is made here where the
caller (the terminal) has none. Without PySide6-Addons, importing this module raises
``AudioUnavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication

from vllmchat.audio.errors import NoAudioDevice
from vllmchat.audio.pcm import PcmFormat
from vllmchat.audio.qt_audio import QAudioDevice, QAudioFormat, QMediaDevices

SOUND_SERVER = "check that the sound server (PulseAudio or PipeWire) is running"
NO_INPUT = f"No microphone found: connect one, or {SOUND_SERVER}"
NO_OUTPUT = f"No speakers or headphones found: connect some, or {SOUND_SERVER}"

_SAMPLE_TYPES = {
    QAudioFormat.SampleFormat.UInt8: "u1",
    QAudioFormat.SampleFormat.Int16: "<i2",
    QAudioFormat.SampleFormat.Int32: "<i4",
    QAudioFormat.SampleFormat.Float: "<f4",
}
_application: QCoreApplication | None = None


@dataclass(frozen=True)
class AudioDeviceInfo:
    """A microphone or an output: its id (kept in the settings), its name, the default?"""

    id: str
    description: str
    is_default: bool


def input_devices() -> list[AudioDeviceInfo]:
    """The microphones, the system's default among them."""
    return [_info(device) for device in _inputs()]


def output_devices() -> list[AudioDeviceInfo]:
    """The speakers and headphones, the system's default among them."""
    return [_info(device) for device in _outputs()]


def find_input(device_id: str = "") -> QAudioDevice:
    """The microphone ``device_id`` names, or the default ("" ); ``NoAudioDevice`` if none."""
    devices = _inputs()
    chosen = pick([_info(d) for d in devices], device_id, kind="microphone")
    return next(d for d in devices if _info(d) == chosen)


def find_output(device_id: str = "") -> QAudioDevice:
    """The output ``device_id`` names, or the default (""); ``NoAudioDevice`` if none."""
    devices = _outputs()
    chosen = pick([_info(d) for d in devices], device_id, kind="output")
    return next(d for d in devices if _info(d) == chosen)


def pick(devices: list[AudioDeviceInfo], wanted: str, *, kind: str) -> AudioDeviceInfo:
    """The device whose id is ``wanted``, or the default for ""; else ``NoAudioDevice``
    saying what is missing (``kind``: "microphone" or "output")."""
    if not devices:
        raise NoAudioDevice(NO_INPUT if kind == "microphone" else NO_OUTPUT)
    if not wanted:
        return next((d for d in devices if d.is_default), devices[0])
    for device in devices:
        if device.id == wanted:
            return device
    names = ", ".join(f"{d.description} ({d.id})" for d in devices)
    raise NoAudioDevice(
        f"The {kind} chosen in the settings ({wanted}) is not connected: choose another, "
        f"or the system default (connected: {names})"
    )


def device_id(device: QAudioDevice) -> str:
    return bytes(device.id().data()).decode("utf-8", errors="replace")


def describe(device: QAudioDevice) -> AudioDeviceInfo:
    return _info(device)


def pcm_format(fmt: QAudioFormat) -> PcmFormat:
    """Qt's audio format as the converter's (``ValueError`` for a type it does not know)."""
    sample_type = _SAMPLE_TYPES.get(fmt.sampleFormat())
    if sample_type is None:
        raise ValueError(f"unsupported sample format {fmt.sampleFormat()}")
    return PcmFormat(fmt.sampleRate(), fmt.channelCount(), sample_type)


def qt_format(fmt: PcmFormat) -> QAudioFormat:
    out = QAudioFormat()
    out.setSampleRate(fmt.sample_rate)
    out.setChannelCount(fmt.channels)
    kinds = {v: k for k, v in _SAMPLE_TYPES.items()}
    out.setSampleFormat(kinds[fmt.sample_type])
    return out


def device_format(device: QAudioDevice, wanted: PcmFormat) -> PcmFormat:
    """``wanted`` where the device takes it, else the device's own preferred format."""
    if device.isFormatSupported(qt_format(wanted)):
        return wanted
    return pcm_format(device.preferredFormat())


def ensure_application() -> None:
    """Qt Multimedia lists no device without a ``QCoreApplication``: make one if none."""
    global _application
    if QCoreApplication.instance() is None:
        _application = QCoreApplication([])


def _inputs() -> list[QAudioDevice]:
    ensure_application()
    return list(QMediaDevices.audioInputs())


def _outputs() -> list[QAudioDevice]:
    ensure_application()
    return list(QMediaDevices.audioOutputs())


def _info(device: QAudioDevice) -> AudioDeviceInfo:
    return AudioDeviceInfo(device_id(device), device.description(), device.isDefault())
