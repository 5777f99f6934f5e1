"""The window on the desktop: its size and place as it was left, the freedesktop menu entry."""
