"""The window's voice: the mic button, the hands-free and speak-replies toggles, the
level meter, listening and speaking replies, and the voice settings."""
