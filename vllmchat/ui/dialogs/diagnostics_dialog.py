"""About and diagnostics: ``vllmchat doctor``'s findings, run off the GUI thread."""

from __future__ import annotations

from html import escape

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
)

from vllmchat import __version__
from vllmchat.core.app.engines import work_engine
from vllmchat.core.doctor import Finding, Report, Status, run_doctor
from vllmchat.ui.common.workers import WorkerGroup

_COLOURS = {
    Status.OK: "#2e7d32",
    Status.INFO: "#546e7a",
    Status.WARN: "#ef6c00",
    Status.FAIL: "#c62828",
}


class DiagnosticsDialog(QDialog):
    """Versions, llama.cpp's backends and devices, the traps found and their fixes."""

    def __init__(self, parent: object = None) -> None:
        super().__init__(parent)  # type: ignore[arg-type]
        self.setWindowTitle("About vllmchat")
        self.resize(720, 520)
        self.report: Report | None = None
        self.workers = WorkerGroup(self)
        self.heading = QLabel(f"<b>vllmchat {__version__}</b> — checking this machine…")
        self.view = QTextBrowser()
        self.view.setAccessibleName("Diagnostics")
        self.rerun = QPushButton("Check again")
        self.copy = QPushButton("Copy report")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.rerun, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.copy, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.rerun.clicked.connect(self.start)
        self.copy.clicked.connect(self.copy_report)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.view)
        layout.addWidget(buttons)

    def start(self) -> None:
        """Run the checks (they load the demo model in a separate engine process)."""
        self.rerun.setEnabled(False)
        self.copy.setEnabled(False)
        self.workers.run(
            lambda: run_doctor(work_engine, device_checks=_device_findings),
            self.show_report,
            self.show_error,
            name="The checks",
        )

    def show_report(self, report: Report) -> None:
        self.report = report
        verdict = "chat works" if report.chat_works else "chat does not work"
        self.heading.setText(f"<b>vllmchat {__version__}</b> — {verdict}")
        rows = []
        for f in report.findings:
            colour = _COLOURS[f.status]
            fix = (
                f"<br><i>Fix:</i> <code>{escape(f.fix)}</code>"
                if f.fix and f.status in (Status.WARN, Status.FAIL)
                else ""
            )
            rows.append(
                f"<p><b style='color:{colour}'>{f.status.value.upper()}</b> "
                f"<b>{escape(f.title)}</b>: {escape(f.detail)}{fix}</p>"
            )
        self.view.setHtml("".join(rows))
        self.rerun.setEnabled(True)
        self.copy.setEnabled(True)

    def show_error(self, exc: Exception) -> None:
        self.heading.setText(
            f"<b>vllmchat {__version__}</b> — the checks failed: {escape(str(exc))}"
        )
        self.rerun.setEnabled(True)

    def copy_report(self) -> None:
        if self.report is not None:
            QGuiApplication.clipboard().setText(self.report.to_text())

    def done(self, result: int) -> None:
        self.workers.join(120_000)
        super().done(result)


def _device_findings() -> list[Finding]:
    """The microphone and the speakers, where Qt Multimedia is installed."""
    try:
        from vllmchat.audio.checks import device_findings
    except ImportError as exc:  # the voice extra is not installed
        return [Finding("microphone", "Microphone", Status.INFO, str(exc))]
    return device_findings()
