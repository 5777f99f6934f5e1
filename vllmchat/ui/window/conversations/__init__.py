"""The window's conversation actions: export, import, summaries edited by hand, pins."""
