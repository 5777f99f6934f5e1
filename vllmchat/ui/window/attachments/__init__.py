"""Attachments in the window: the attach button, drops, pastes, and the chips of waiting files."""
