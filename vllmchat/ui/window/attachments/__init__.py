"""Attachments in the window: the 📎 button, drops, pastes, and the chips of waiting files."""
