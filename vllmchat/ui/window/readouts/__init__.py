"""What the window reads out: the status line, the memory panel's figures, the engine's banner."""
