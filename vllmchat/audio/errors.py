"""Why audio cannot be had: Qt Multimedia missing, a system library it needs missing, or
no device to record or play with."""

from __future__ import annotations

from vllmchat.core.machine.shared_libraries import MissingLibraries, is_qt_own, library_in_error

INSTALL_VOICE = "pip install 'vllmchat[voice]'"


def missing_library_fix(library: str) -> str:
    """The one command that brings ``library`` back (Qt's own: PySide6 again)."""
    if is_qt_own(library):
        return "reinstall PySide6: scripts/setup.sh"
    return MissingLibraries((library,)).install_command()


def missing_library_message(library: str) -> str:
    """ "Qt Multimedia cannot load libpulse.so.0 (install libpulse0: sudo apt-get ...)"."""
    fix = missing_library_fix(library)
    if is_qt_own(library):
        return f"Qt Multimedia cannot load {library} ({fix})"
    debian = fix.startswith("sudo apt-get")
    package = MissingLibraries((library,)).apt_packages[0] if debian else "it"
    return f"Qt Multimedia cannot load {library} (install {package}: {fix})"


class AudioUnavailable(ImportError):
    """Qt Multimedia cannot be imported: PySide6-Addons (the ``voice`` extra) is not
    installed, or a system library it loads is missing (``missing_library``). Raised by
    importing the audio modules, so that ``except ImportError`` catches it too."""

    def __init__(self, message: str = INSTALL_VOICE, *, missing_library: str = "") -> None:
        super().__init__(message)
        self.missing_library = missing_library

    @classmethod
    def from_import_error(cls, error: ImportError) -> AudioUnavailable:
        """The true cause of a failed import of Qt Multimedia."""
        if isinstance(error, AudioUnavailable):
            return error
        library = library_in_error(str(error))
        if library:
            return cls(missing_library_message(library), missing_library=library)
        return cls()


class NoAudioDevice(RuntimeError):
    """No microphone (or no speakers), or not the one asked for; the message says which."""
