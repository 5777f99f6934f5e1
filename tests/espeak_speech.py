"""A sentence spoken by eSpeak NG (its library from espeakng-loader) into a WAV file.

Run as a program, in a process of its own: eSpeak NG keeps one voice for its whole
process, and the Piper voice's phonemes come from the same library.
``python -m tests.espeak_speech VOICE TEXT OUT.wav``
"""

from __future__ import annotations

import ctypes
import sys
import wave
from pathlib import Path

_SYNCHRONOUS = 0x02
_CHARS_UTF8 = 1


def main(voice: str, text: str, out: str) -> None:
    import espeakng_loader as loader

    lib = ctypes.CDLL(str(loader.get_library_path()))
    data = str(Path(loader.get_data_path()).parent).encode()
    rate = lib.espeak_Initialize(_SYNCHRONOUS, 0, data, 0)
    samples = bytearray()
    callback_type = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
    )

    def collect(wav, count, _events):  # type: ignore[no-untyped-def]
        if count > 0:
            samples.extend(ctypes.string_at(wav, count * 2))
        return 0

    callback = callback_type(collect)
    lib.espeak_SetSynthCallback(callback)
    if lib.espeak_SetVoiceByName(voice.encode()) != 0:
        raise SystemExit(f"eSpeak NG has no voice {voice!r}")
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    encoded = text.encode()
    if lib.espeak_Synth(encoded, len(encoded) + 1, 0, 0, 0, _CHARS_UTF8, None, None) != 0:
        raise SystemExit("eSpeak NG could not speak")
    lib.espeak_Synchronize()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes(bytes(samples))


if __name__ == "__main__":
    main(*sys.argv[1:4])
