"""The one owner of the app's settings: it holds the current value, announces each
change as a ``SettingsChanged`` event, and writes only settings that have been
confirmed to work (a model loaded with them, or a change that needs no load).

Load settings changed while no model is loaded are the current ones (the next load
uses them) but are not written: until a load confirms them, what is written keeps
the last load settings that loaded (or were read from disk)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from vllmchat.core.app.events import SettingsChanged, StorageWarning
from vllmchat.core.app_settings import AppSettings

Persist = Callable[[AppSettings], None]


class SettingsModel:
    """``current`` is the only copy; ``adopt`` is the only way it changes."""

    def __init__(self, settings: AppSettings, persist: Persist | None = None) -> None:
        self._current = settings
        self._persist = persist
        self._written = settings  # what is on disk (or would be, with no ``persist``)
        self._confirmed = settings.load  # the last load settings a load confirmed

    @property
    def current(self) -> AppSettings:
        return self._current

    def adopt(
        self, settings: AppSettings, *, loaded: bool = False
    ) -> Iterator[SettingsChanged | StorageWarning]:
        """Take ``settings``: announce them and write what is confirmed (nothing when
        unchanged). ``loaded``: a model loaded with their load settings, which are then
        written; else the last confirmed load settings are written in their place."""
        if loaded:
            self._confirmed = settings.load
        if settings != self._current:
            self._current = settings
            yield SettingsChanged(settings)
        written = replace(settings, load=self._confirmed)
        if written == self._written:
            return
        self._written = written
        if self._persist is None:
            return
        try:
            self._persist(written)
        except OSError as exc:
            yield StorageWarning(f"The settings were not saved: {exc.strerror or exc}.")
