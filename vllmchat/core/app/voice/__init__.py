"""The app layer's voice: listening sessions, transcriptions and spoken replies."""
