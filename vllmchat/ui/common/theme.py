"""The system's light or dark colour scheme (Qt 6.5+ reports it and its changes), and
the colours messages take in each."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QGuiApplication, QPalette

# (background, border, label) per role and scheme: you and the model apart at a glance.
COLORS = {
    False: {
        "user": ("#e3edfc", "#b8cdf0", "#1a56b8"),
        "assistant": ("#ffffff", "#dddddd", "#2d6a2d"),
        "summary": ("#fff7dc", "#ecd58a", "#8a6500"),
    },
    True: {
        "user": ("#1d3352", "#2f4f7a", "#8ab4f8"),
        "assistant": ("#26282b", "#3c4043", "#81c995"),
        "summary": ("#3a3221", "#5c4d2a", "#e6c07b"),
    },
}


def is_dark() -> bool:
    """Whether the system asks for dark colours (the palette decides where Qt cannot tell)."""
    app = QGuiApplication.instance()
    if not isinstance(app, QGuiApplication):
        return False
    scheme = app.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def message_style(role: str, dark: bool) -> str:
    background, border, _label = COLORS[dark].get(role, COLORS[dark]["assistant"])
    text = "#e8eaed" if dark else "#202124"
    return (
        f"QFrame#message-{role} {{ background: {background}; border: 1px solid {border}; "
        f"border-radius: 8px; }} QFrame#message-{role} QTextBrowser {{ background: transparent; "
        f"color: {text}; }}"
    )


def view_style(dark: bool) -> str:
    """One style sheet for every message in a view (cheaper than one per message)."""
    return " ".join(message_style(role, dark) for role in COLORS[dark])


def label_color(role: str, dark: bool) -> str:
    return COLORS[dark].get(role, COLORS[dark]["assistant"])[2]


class ThemeWatcher(QObject):
    """Emits ``changed(dark)`` when the system switches between light and dark: Qt's
    colour-scheme signal, or a new application palette where the platform reports no
    scheme."""

    changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.dark = is_dark()
        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            app.styleHints().colorSchemeChanged.connect(self._on_scheme)
            app.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.ApplicationPaletteChange, QEvent.Type.ThemeChange):
            self._on_scheme(None)
        return False

    def _on_scheme(self, _scheme: object) -> None:
        dark = is_dark()
        if dark != self.dark:
            self.dark = dark
            self.changed.emit(dark)
