"""Dialogs of their own: settings, and diagnostics."""
