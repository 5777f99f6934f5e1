"""The About/Diagnostics dialog on its own: the doctor's findings, run off the GUI thread."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")


def test_diagnostics_dialog_shows_the_doctors_findings(qtbot, demo_model):
    from PySide6.QtGui import QGuiApplication

    from vllmchat.ui.dialogs.diagnostics_dialog import DiagnosticsDialog

    dialog = DiagnosticsDialog()
    qtbot.addWidget(dialog)
    dialog.start()
    assert not dialog.rerun.isEnabled()  # checks run in a worker; the dialog stays responsive
    qtbot.waitUntil(lambda: dialog.report is not None, timeout=120_000)
    text = dialog.view.toPlainText()
    assert "llama.cpp backends: CPU" in text and "Chat:" in text
    assert "chat works" in dialog.heading.text()
    dialog.copy.click()
    assert "llama.cpp backends" in QGuiApplication.clipboard().text()
    dialog.close()
    # The worker's thread ends just after it hands over the report.
    qtbot.waitUntil(lambda: not dialog.workers.busy, timeout=10_000)
