"""The one owner of the app's settings: it holds the current value, announces each
change as a ``SettingsChanged`` event, and writes only settings that have been
confirmed to work (a model loaded with them, or a change that needs no load)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vllmchat.core.app.events import SettingsChanged, StorageWarning
from vllmchat.core.app_settings import AppSettings

Persist = Callable[[AppSettings], None]


class SettingsModel:
    """``current`` is the only copy; ``adopt`` is the only way it changes."""

    def __init__(self, settings: AppSettings, persist: Persist | None = None) -> None:
        self._current = settings
        self._persist = persist

    @property
    def current(self) -> AppSettings:
        return self._current

    def adopt(self, settings: AppSettings) -> Iterator[SettingsChanged | StorageWarning]:
        """Take confirmed ``settings``: announce and write them (nothing when unchanged)."""
        if settings == self._current:
            return
        self._current = settings
        yield SettingsChanged(settings)
        if self._persist is None:
            return
        try:
            self._persist(settings)
        except OSError as exc:
            yield StorageWarning(f"The settings were not saved: {exc.strerror or exc}.")
