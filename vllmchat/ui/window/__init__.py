"""The main window, its actions, the bridge to the application layer, and the start-up."""
