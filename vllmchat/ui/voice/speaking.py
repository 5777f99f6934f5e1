"""Replies spoken as they stream: each piece the voice has made is handed to the
player as it comes, and the user cuts it short (barge-in) by pressing the mic, typing,
Esc or Stop. The reply goes on being said after its turn has ended (the engine is free
meanwhile). ``spoken`` tells when a reply has been heard to its end, which is when
hands-free listening starts again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from vllmchat.core.app.voice.events import SpeakingEnded, SpokenPiece


class Playing(Protocol):
    """What plays speech (``vllmchat.audio.player.Player``, or a stand-in)."""

    idle: SignalInstance
    failed: SignalInstance

    @property
    def playing(self) -> bool: ...

    def play(self, pcm: bytes, sample_rate: int) -> None: ...

    def stop(self) -> None: ...


PlayerFactory = Callable[[str], Playing]
"""(output device id) -> a player."""


def qt_player(device_id: str) -> Playing:
    """Speakers through Qt Multimedia (``AudioUnavailable`` where it is missing)."""
    from vllmchat.audio.errors import AudioUnavailable

    try:
        from vllmchat.audio.player import Player
    except ImportError as exc:
        raise AudioUnavailable.from_import_error(exc) from exc
    return Player(device_id)


class ReplyVoice(QObject):
    """Plays what the voice says; ``barge_in`` silences it until the next ``begin``."""

    spoken = Signal()
    """What was begun has been spoken to its end and played (not after a barge-in)."""
    failed = Signal(str)
    """The speakers cannot be had, in words for the user."""

    def __init__(
        self,
        stop_speaking: Callable[[], None],
        settings: Callable[[], Any],
        *,
        make_player: PlayerFactory = qt_player,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.stop_speaking, self.settings, self.make_player = stop_speaking, settings, make_player
        self.player: Playing | None = None
        self._device: str | None = None  # the player's device
        self.silenced = False  # barged in: pieces still on their way are dropped
        self.made_ended = True  # the voice has said everything it will of this reply
        self.played: list[SpokenPiece] = []  # what was handed to the player, this reply

    def begin(self, device_id: str | None = None) -> None:
        """A reply (or a sentence tried) is about to be spoken, on ``device_id`` (the
        settings' output when None)."""
        self.silenced, self.made_ended = False, False
        self.played = []
        wanted = self.settings().voice_output_device if device_id is None else device_id
        if self.player is not None and wanted != self._device:
            self.player.stop()
            self.player = None
        self._device = wanted

    @property
    def speaking(self) -> bool:
        """Pieces are being made or played."""
        return not self.silenced and (
            not self.made_ended or (self.player is not None and self.player.playing)
        )

    def piece(self, piece: SpokenPiece) -> None:
        if self.silenced:
            return
        player = self._player()
        if player is None:
            return
        self.played.append(piece)
        player.play(piece.pcm, piece.sample_rate)

    def ended(self, event: SpeakingEnded) -> None:
        """The voice has made its last piece: ``spoken`` once the player has played it.
        A reply cut short (a newer turn silenced it) is not played on."""
        self.made_ended = True
        if event.stopped and self.player is not None:
            self.player.stop()
        if event.stopped or self.silenced:
            return
        if self.player is None or not self.player.playing:
            self.spoken.emit()

    def barge_in(self) -> None:
        """Silence at once: the player's queue is dropped and the voice stops making more."""
        self.silenced = True
        self.stop_speaking()
        if self.player is not None:
            self.player.stop()

    def _player(self) -> Playing | None:
        if self.player is None:
            device = self._device if self._device is not None else ""
            try:
                self.player = self.make_player(device)
            except Exception as exc:  # Qt Multimedia missing
                self._give_up(f"The reply cannot be played: {exc}")
                return None
            self._device = device
            self.player.idle.connect(self._on_idle)
            self.player.failed.connect(self._on_failed)
        return self.player

    def _on_idle(self) -> None:
        if self.made_ended and not self.silenced:
            self.spoken.emit()

    def _on_failed(self, message: str) -> None:
        self.player = None
        self._give_up(f"The reply cannot be played: {message}")

    def _give_up(self, message: str) -> None:
        self.silenced = True
        self.stop_speaking()
        self.failed.emit(message)

    def close(self) -> None:
        self.silenced = True
        if self.player is not None:
            self.player.stop()
