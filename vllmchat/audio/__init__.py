"""Audio in and out through Qt Multimedia: devices, the recorder and the player (not core)."""
