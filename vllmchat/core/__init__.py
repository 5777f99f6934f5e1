"""Qt-free core: engine, models, memory estimate, downloads, conversations, settings."""
