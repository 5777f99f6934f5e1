"""Documents (and images) attached to a message: extraction with a page and section map,
chunks for retrieval, an FTS5 index of them, and how they are put into a prompt."""
