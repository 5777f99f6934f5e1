"""``vllmchat doctor``'s audio lines: Qt Multimedia, the microphones, the speakers.

Qt's own messages while it looks (no sound server, a missing PipeWire library) are
kept in the findings' data instead of being printed over the report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from PySide6.QtCore import (
    QCoreApplication,
    QMessageLogContext,
    QMicrophonePermission,
    Qt,
    QtMsgType,
    qInstallMessageHandler,
)

from vllmchat.audio.errors import AudioUnavailable, missing_library_fix
from vllmchat.core.doctor.findings import Finding, Status

OPEN_WAIT_S = 0.5  # how long the default microphone is given to open, and fail


def device_findings() -> list[Finding]:
    """Qt Multimedia importable? any microphone? the default one opens? any output?"""
    messages: list[str] = []
    with _qt_messages(messages):
        try:
            from vllmchat.audio import devices
        except AudioUnavailable as exc:
            return [_unavailable(exc)]
        inputs, outputs = devices.input_devices(), devices.output_devices()
        opened = _open_default_input() if inputs else None
    data: dict[str, Any] = {
        "inputs": [d.__dict__ for d in inputs],
        "outputs": [d.__dict__ for d in outputs],
        "qt_messages": messages,
    }
    return [_microphone(inputs, opened, data), _speakers(outputs, data)]


def _unavailable(error: AudioUnavailable) -> Finding:
    """Qt Multimedia cannot be imported: the extra missing, or a system library."""
    if error.missing_library:
        data = {"missing_library": error.missing_library}
        detail = f"{error}, so no microphone or speakers"
        fix = missing_library_fix(error.missing_library)
        return Finding("audio", "Audio devices", Status.WARN, detail, fix, data)
    detail = f"Qt Multimedia is not installed, so no microphone or speakers: {error}"
    return Finding("audio", "Audio devices", Status.INFO, detail, str(error))


def _microphone(inputs: list[Any], failure: str | None, data: dict[str, Any]) -> Finding:
    from vllmchat.audio.devices import NO_INPUT

    if not inputs:
        return Finding("microphone", "Microphone", Status.INFO, NO_INPUT, data=data)
    default = next((d for d in inputs if d.is_default), inputs[0])
    found = f"{len(inputs)} found, the default “{default.description}”"
    if failure:
        return Finding(
            "microphone",
            "Microphone",
            Status.WARN,
            f"{found}: {failure}",
            "close the program using the microphone, or allow this app to use it "
            "(the system's privacy settings)",
            {**data, "open_error": failure},
        )
    return Finding("microphone", "Microphone", Status.OK, f"{found} opens", data=data)


def _speakers(outputs: list[Any], data: dict[str, Any]) -> Finding:
    from vllmchat.audio.devices import NO_OUTPUT

    if not outputs:
        return Finding("speakers", "Speakers", Status.INFO, NO_OUTPUT, data=data)
    default = next((d for d in outputs if d.is_default), outputs[0])
    detail = f"{len(outputs)} found, the default “{default.description}”"
    return Finding("speakers", "Speakers", Status.OK, detail, data=data)


def _open_default_input() -> str | None:
    """Why the default microphone does not record (None: it opens and records)."""
    from vllmchat.audio.recorder import PRIVACY_HINT, Recorder

    app = QCoreApplication.instance()
    assert app is not None  # made when the devices were listed
    status = app.checkPermission(QMicrophonePermission())
    if status == Qt.PermissionStatus.Denied:
        return f"this app may not use it (permission denied): {PRIVACY_HINT}"
    if status == Qt.PermissionStatus.Undetermined:
        return None  # the system asks the user at the first recording
    failures: list[str] = []
    recorder = Recorder(on_pcm=lambda _pcm: None, on_failed=failures.append)
    recorder.start()
    deadline = time.monotonic() + OPEN_WAIT_S
    while not failures and time.monotonic() < deadline:
        QCoreApplication.processEvents()
        time.sleep(0.01)
    recorder.stop()
    recorder.deleteLater()
    return failures[0] if failures else None


@contextmanager
def _qt_messages(into: list[str]) -> Iterator[None]:
    def keep(_kind: QtMsgType, _context: QMessageLogContext, message: str) -> None:
        into.append(message)

    previous = qInstallMessageHandler(keep)
    try:
        yield
    finally:
        qInstallMessageHandler(previous)
