"""Text to phonemes through eSpeak NG's library, as Piper voices were trained on.

eSpeak NG is GPL-3.0: it is not a dependency of vllmchat. It is loaded at run time
from the ``espeakng-loader`` package (the library and its data in one wheel) or from
the system's ``libespeak-ng``, where the user has installed either. sherpa-onnx
(Apache-2.0) no longer carries it, and takes the phonemes from here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import threading
from importlib import import_module
from pathlib import Path

_AUDIO_OUTPUT_SYNCHRONOUS = 0x02
_CHARS_UTF8 = 1
_PHONEMES_IPA = 0x02
# Clause punctuation Piper's voices know: phonemes are made per clause, the mark kept.
_CLAUSE = re.compile(r"([,.;:!?]+)\s*")


class PhonemizerMissing(RuntimeError):
    """eSpeak NG's library is not installed (Piper voices need it for their phonemes)."""


class EspeakPhonemizer:
    """IPA phonemes of English (or another eSpeak voice) text, one call at a time."""

    _lock = threading.Lock()  # eSpeak NG keeps global state

    def __init__(self, voice: str = "en-us") -> None:
        library, data_parent = _find_library()
        self._lib = ctypes.CDLL(library)
        self._lib.espeak_Initialize.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        self._lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self._lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        self._lib.espeak_TextToPhonemes.argtypes = [
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
        ]
        with self._lock:
            path = str(data_parent).encode() if data_parent else None
            if self._lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, path, 0) < 0:
                raise PhonemizerMissing("eSpeak NG's data could not be read")
            if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise PhonemizerMissing(f"eSpeak NG has no voice {voice!r}")

    def phonemes(self, text: str) -> str:
        """``text``'s phonemes, with its clause punctuation kept between clauses."""
        parts = _CLAUSE.split(text.strip())
        out: list[str] = []
        for i in range(0, len(parts), 2):
            clause = parts[i].strip()
            mark = parts[i + 1][0] if i + 1 < len(parts) else ""
            spoken = self._clause(clause) if clause else ""
            if spoken or mark:
                out.append(spoken + mark)
        return " ".join(out)

    def _clause(self, text: str) -> str:
        buffer = ctypes.c_char_p(text.encode("utf-8"))
        pointer = ctypes.pointer(buffer)
        pieces: list[str] = []
        with self._lock:
            while pointer.contents.value:
                result = self._lib.espeak_TextToPhonemes(pointer, _CHARS_UTF8, _PHONEMES_IPA)
                if result:
                    pieces.append(result.decode("utf-8", errors="ignore").strip())
        return " ".join(piece for piece in pieces if piece)


def _find_library() -> tuple[str, Path | None]:
    """eSpeak NG's library and the folder holding its ``espeak-ng-data`` (None: its default)."""
    try:
        loader = import_module("espeakng_loader")
        data = Path(loader.get_data_path())
        return str(loader.get_library_path()), data.parent
    except (ImportError, RuntimeError):
        pass
    found = ctypes.util.find_library("espeak-ng")
    if found:
        return found, None
    raise PhonemizerMissing(
        "Piper voices need eSpeak NG's phonemes (GPL-3.0, not installed with vllmchat): "
        "pip install espeakng-loader, or install the system's espeak-ng"
    )
