"""The events of getting a model: a download's progress."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DownloadProgress:
    """Bytes so far for the whole quant, speed and time left."""

    filename: str
    done: int
    total: int
    bytes_per_s: float
    eta_s: float

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ModelEvent = DownloadProgress
"""What the models layer announces."""
