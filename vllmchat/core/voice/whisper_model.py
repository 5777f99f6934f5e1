"""faster-whisper's model, made to encode a short recording once when it detects its language.

``WhisperModel.transcribe`` with no language runs the encoder twice over the same
30 s window: once to detect the language, once to decode. On two cores that second
pass is about 0.3 s of every request, which is most of what a short utterance waits
for. Here detection keeps its encoder output, and the decoding's ``encode`` takes it
back when its window is the very same array. Recordings longer than one window are
detected the usual way. This module is the only one that reaches into faster-whisper's
model class; it runs inside the recogniser's process.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import numpy as np

from vllmchat.core.settings import within_cores


def whisper_model(model_dir: str, threads: int) -> Any:
    """A faster-whisper model (int8, CPU) that detects a language without a second encode."""
    whisper = import_module("faster_whisper")
    pad_or_trim = import_module("faster_whisper.audio").pad_or_trim

    class OneEncodeWhisper(whisper.WhisperModel):  # type: ignore[misc, name-defined]
        _kept: tuple[np.ndarray[Any, Any], Any] | None = None

        def detect_language(self, audio: Any = None, features: Any = None, **options: Any) -> Any:
            window = self.feature_extractor.nb_max_frames
            if audio is not None or features is None or features.shape[-1] - 1 > window:
                return super().detect_language(audio, features, **options)
            # the window the decoding will encode: every frame but the last, padded
            segment = pad_or_trim(features[..., : features.shape[-1] - 1])
            encoded = whisper.WhisperModel.encode(self, segment)
            results = self.model.detect_language(encoded)[0]
            self._kept = (segment, encoded)
            probabilities = [(token[2:-2], probability) for token, probability in results]
            language, probability = probabilities[0]
            return language, probability, probabilities

        def encode(self, features: np.ndarray[Any, Any]) -> Any:
            kept, self._kept = self._kept, None
            if kept is not None and np.array_equal(kept[0], features):  # shapes checked too
                return kept[1]
            return super().encode(features)

    return OneEncodeWhisper(
        model_dir, device="cpu", compute_type="int8", cpu_threads=within_cores(threads)
    )
