"""The tools layer's events as signals: servers' states, approvals, finished calls.

``publish`` is called on the engine's thread (a turn's steps) or on the tool
manager's own thread (servers' states); the window's slots run on the GUI thread.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from vllmchat.core.app.events import ToolPickChanged
from vllmchat.core.tools.events import ApprovalNeeded, ServerStatus, ToolCallFinished


class ToolEvents(QObject):
    """One signal per tool event type."""

    server_status = Signal(object)
    """``ServerStatus``: a server starting, ready with its tools, or failed (why)."""
    approval_needed = Signal(object)
    """``ApprovalNeeded``: a call waits for the user; its ``answer`` future resumes the turn."""
    call_finished = Signal(object)
    """``ToolCallFinished``: a call's result (run, denied, failed, ...)."""
    pick_changed = Signal(object)
    """``ToolPickChanged``: the tools a conversation offers from its next turn."""

    def publish(self, event: object) -> bool:
        """Emit the signal of a tool event; False for any other event."""
        if isinstance(event, ApprovalNeeded):
            self.approval_needed.emit(event)
        elif isinstance(event, ToolCallFinished):
            self.call_finished.emit(event)
        elif isinstance(event, ServerStatus):
            self.server_status.emit(event)
        elif isinstance(event, ToolPickChanged):
            self.pick_changed.emit(event)
        else:
            return False
        return True
