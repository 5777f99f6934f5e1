"""The conversation store: SQLite, its schema and records, its faults, and recovery."""
